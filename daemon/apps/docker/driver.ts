/**
 * The apps driver on Docker: the engine API (dockerode) for state, images,
 * logs and stats; the compose v2 CLI for bringing projects to their files.
 */
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { ApiError, unavailable } from '../../lib/errors.js';
import type { AppsDriver, ContainerStats, ContainerSummary, LogLine, ProjectRef, PullProgress } from '../driver.js';
import { engineAddress, type AddressSource } from './address.js';
import { ComposeCli } from './compose.js';
import { Engine, LABEL_PROJECT } from './engine.js';
import { LABEL_APP } from '../compose/render.js';

export interface DockerDriverOptions {
  dockerHost?: string;
  composeBinary?: string;
  env: NodeJS.ProcessEnv;
  /** Private DOCKER_CONFIG for compose. */
  configDir: string;
}

export class DockerDriver implements AppsDriver {
  readonly engineAddress: string;
  private readonly engine: Engine | null;
  private readonly badAddress: string | null = null;
  private readonly compose: ComposeCli;
  readonly source: AddressSource | null = null;
  private okUntil = 0;

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

  private get e(): Engine {
    if (!this.engine) throw unavailable(`Docker engine address is not usable: ${this.badAddress}`);
    return this.engine;
  }

  async availability(): Promise<Availability[]> {
    let engine: Availability;
    try {
      const v = await this.e.version();
      engine = availableAs('dockerd', `${v.version} (API ${v.api}) at ${this.engineAddress}`);
    } catch (err) {
      engine = missing('dockerd', err instanceof ApiError ? err.message : String(err));
    }
    return [engine, await this.compose.detect(true)];
  }

  async ping(): Promise<void> {
    // One successful ping vouches for a second: list-heavy clients do not pay a round trip per call.
    if (Date.now() < this.okUntil) return;
    await this.e.ping();
    this.okUntil = Date.now() + 1000;
  }

  async requireCompose(): Promise<void> {
    await this.compose.require();
  }

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

  remove(project: string): Promise<void> {
    return this.e.removeProject(project);
  }

  logs(containerId: string, tail: number): Promise<LogLine[]> {
    return this.e.logs(containerId, tail);
  }

  stats(containerId: string): Promise<ContainerStats> {
    return this.e.stats(containerId);
  }
}
