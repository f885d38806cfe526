/**
 * The apps driver on Docker: the engine API (dockerode) for state, images,
 * logs and stats; the compose v2 CLI for bringing projects to their files.
 * Grouped as the contract in ../driver.ts is: availability, engine, compose,
 * observation.
 */
import { ProbeCache, availableAs, missing, type Availability } from '../../lib/availability.js';
import { internal } from '../../lib/errors.js';
import {
  ENGINE,
  type AppsDriver,
  type ContainerSignal,
  type ContainerStats,
  type EngineWatch,
  type ContainerSummary,
  type LogLine,
  type ProjectRef,
  type PullProgress,
} from '../driver.js';
import { engineAddress, type AddressSource } from './address.js';
import { ComposeCli } from './compose.js';
import { Engine, LABEL_PROJECT, unreachableReason } from './engine.js';
import { LABEL_APP } from '../compose/render.js';
import { EngineEvents } from './watch.js';
import type { Logger } from 'pino';

export interface DockerDriverOptions {
  dockerHost?: string;
  composeBinary?: string;
  env: NodeJS.ProcessEnv;
  /** Private DOCKER_CONFIG for compose. */
  configDir: string;
}

/**
 * How long a probe of the engine is trusted: list-heavy clients do not pay a
 * round trip per call, and an engine that stops is noticed within a second
 * (a call that reaches a stopped engine meanwhile is 503 from the call itself).
 */
const ENGINE_PROBE_MS = 1000;

export class DockerDriver implements AppsDriver {
  /** The engine's address as configured (for messages). */
  readonly engineAddress: string;
  readonly source: AddressSource | null = null;
  private readonly engine: Engine | null;
  private readonly badAddress: string | null = null;
  private readonly compose: ComposeCli;
  private readonly engineProbe = new ProbeCache(() => this.probeEngine(), ENGINE_PROBE_MS);

  constructor(opts: DockerDriverOptions) {
    let engine: Engine | null = null;
    let composeEnv: Record<string, string> = {};
    let url = opts.dockerHost || opts.env.DOCKER_HOST || 'unix:///var/run/docker.sock';
    try {
      const a = engineAddress(opts.dockerHost, opts.env);
      engine = new Engine(a.address, a.certs);
      composeEnv = a.address.composeEnv;
      url = a.address.url;
      this.source = a.source;
    } catch (err) {
      this.badAddress = (err as Error).message;
    }
    this.engine = engine;
    this.engineAddress = url;
    this.compose = new ComposeCli(opts.composeBinary, opts.env, composeEnv, opts.configDir);
  }

  // ------------------------------------------------------------ availability

  async availability(opts: { fresh?: boolean } = {}): Promise<Availability[]> {
    return Promise.all([this.engineProbe.get(opts), this.compose.availability(opts)]);
  }

  private async probeEngine(): Promise<Availability> {
    if (!this.engine) return missing(ENGINE, `the Docker engine address is not usable: ${this.badAddress}`);
    try {
      const v = await this.engine.version();
      return availableAs(ENGINE, `${v.version} (API ${v.api}) at ${this.engineAddress}`);
    } catch (err) {
      return missing(ENGINE, unreachableReason(this.engineAddress, err));
    }
  }

  /** The engine; the service has asked for its availability first, so an unusable address here is a bug. */
  private get e(): Engine {
    if (!this.engine) throw internal(`the Docker engine was used although its address is not usable (${this.badAddress})`);
    return this.engine;
  }

  // ------------------------------------------------------------ engine

  containers(opts: { appId?: string; project?: string } = {}): Promise<ContainerSummary[]> {
    const label: string[] = [];
    if (opts.appId) label.push(`${LABEL_APP}=${opts.appId}`);
    if (opts.project) label.push(`${LABEL_PROJECT}=${opts.project}`);
    return this.e.containers(label.length ? { label } : {});
  }

  imageExists(ref: string): Promise<boolean> {
    return this.e.imageExists(ref);
  }

  pull(ref: string, onProgress: (p: PullProgress) => void, signal?: AbortSignal): Promise<void> {
    return this.e.pull(ref, onProgress, signal);
  }

  remove(project: string): Promise<void> {
    return this.e.removeProject(project);
  }

  // ------------------------------------------------------------ compose

  up(p: ProjectRef, opts: { start: boolean }, signal?: AbortSignal): Promise<void> {
    return this.compose.up(p, opts.start, signal);
  }

  check(p: ProjectRef): Promise<void> {
    return this.compose.check(p);
  }

  stop(p: ProjectRef): Promise<void> {
    return this.compose.stop(p);
  }

  restart(p: ProjectRef): Promise<void> {
    return this.compose.restart(p);
  }

  // ------------------------------------------------------------ observation

  logs(containerId: string, tail: number): Promise<LogLine[]> {
    return this.e.logs(containerId, tail);
  }

  stats(containerId: string): Promise<ContainerStats> {
    return this.e.stats(containerId);
  }

  liveState(container: string): Promise<string | null> {
    return this.e.liveState(container);
  }

  watch(onSignal: (s: ContainerSignal) => void, onResync: () => void, log: Logger): EngineWatch {
    // A bad engine address is reported by availability(); there is nothing to watch.
    if (!this.engine) return { stop: async () => {} };
    const w = new EngineEvents(this.engine, onSignal, onResync, log);
    w.start();
    return w;
  }
}
