/**
 * A fake apps driver for service rules that need no engine (the guests port,
 * what the service asks of the runtime). It never replaces the runtime tests.
 */
import { unavailable } from '../../daemon/lib/errors.js';
import type { AppsDriver, ContainerStats, ContainerSummary, LogLine, ProjectRef, PullProgress } from '../../daemon/apps/driver.js';
import type { Availability } from '../../daemon/lib/availability.js';

export class FakeAppsDriver implements AppsDriver {
  readonly engineAddress = 'unix:///fake/docker.sock';
  reachable = true;
  images = new Set<string>();
  list: ContainerSummary[] = [];
  calls: string[] = [];

  async availability(): Promise<Availability[]> {
    return [];
  }
  async ping(): Promise<void> {
    if (!this.reachable) throw unavailable(`Docker engine is not reachable at ${this.engineAddress} (fake)`);
  }
  async requireCompose(): Promise<void> {}
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
  async remove(project: string): Promise<void> {
    this.calls.push(`remove ${project}`);
    this.list = this.list.filter((c) => c.project !== project);
  }
  async logs(): Promise<LogLine[]> {
    return [];
  }
  async stats(): Promise<ContainerStats> {
    throw new Error('no stats in the fake');
  }
}
