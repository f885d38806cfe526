/**
 * A fake apps driver for service rules that need no engine (the guests port,
 * what the domain asks of the runtime, recovery while the engine is away). It
 * never replaces the runtime tests.
 */
import {
  COMPOSE,
  ENGINE,
  type AppsDriver,
  type ContainerSignal,
  type ContainerStats,
  type EngineWatch,
  type ContainerSummary,
  type LogLine,
  type ProjectRef,
  type PullProgress,
} from '../../daemon/apps/driver.js';
import { availableAs, missing, type Availability } from '../../daemon/lib/availability.js';
import { unavailable } from '../../daemon/lib/errors.js';

export class FakeAppsDriver implements AppsDriver {
  reachable = true;
  composeMissing = false;
  images = new Set<string>();
  list: ContainerSummary[] = [];
  calls: string[] = [];

  async availability(): Promise<Availability[]> {
    return [
      this.reachable ? availableAs(ENGINE, 'fake') : missing(ENGINE, 'Docker engine is not reachable at unix:///fake/docker.sock (fake)'),
      this.composeMissing ? missing(COMPOSE, 'compose v2 is not installed (fake)') : availableAs(COMPOSE, 'fake'),
    ];
  }
  async containers(opts: { appId?: string; project?: string } = {}): Promise<ContainerSummary[]> {
    if (!this.reachable) throw unavailable('down');
    return this.list.filter((c) => (!opts.project || c.project === opts.project) && (!opts.appId || c.app_id === opts.appId));
  }
  async imageExists(ref: string): Promise<boolean> {
    return this.images.has(ref);
  }
  async pull(ref: string, onProgress: (p: PullProgress) => void): Promise<void> {
    this.calls.push(`pull ${ref}`);
    onProgress({ current: 1, total: 1, status: 'Download complete' });
    this.images.add(ref);
  }
  async remove(project: string): Promise<void> {
    if (!this.reachable) throw unavailable('down');
    this.calls.push(`remove ${project}`);
    this.list = this.list.filter((c) => c.project !== project);
  }
  async up(p: ProjectRef, opts: { start: boolean }): Promise<void> {
    this.calls.push(`up ${p.project} ${opts.start ? 'start' : 'create'}`);
  }
  async check(p: ProjectRef): Promise<void> {
    this.calls.push(`check ${p.project}`);
  }
  async stop(p: ProjectRef): Promise<void> {
    this.calls.push(`stop ${p.project}`);
  }
  async restart(p: ProjectRef): Promise<void> {
    this.calls.push(`restart ${p.project}`);
  }
  async logs(): Promise<LogLine[]> {
    return [];
  }
  async stats(): Promise<ContainerStats> {
    throw new Error('no stats in the fake');
  }
  async liveState(): Promise<string | null> {
    return null;
  }
  /** The watch's callbacks while one runs (a test sends signals through them). */
  watching: { onSignal: (s: ContainerSignal) => void; onResync: () => void } | null = null;
  watch(onSignal: (s: ContainerSignal) => void, onResync: () => void): EngineWatch {
    this.watching = { onSignal, onResync };
    return { stop: async () => void (this.watching = null) };
  }
}
