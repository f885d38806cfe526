/**
 * The Docker engine over its API socket, through dockerode (the engine API
 * client most Node projects use; it follows the engine's API and carries
 * streams, multiplexed logs and progress for us). hostd asks the engine for
 * state, images, pulls, logs and stats; compose work goes through the compose
 * CLI (compose.ts).
 */
import Docker from 'dockerode';
import { type ApiError, unavailable } from '../../lib/errors.js';
import type { ContainerStats, ContainerSummary, LogLine, PortBinding, PullProgress } from '../driver.js';
import type { EngineAddress } from './address.js';
import { LABEL_APP, LABEL_GENERATION } from '../compose/render.js';
import { parseLogFrames, statsOf } from './parse.js';

export const LABEL_PROJECT = 'com.docker.compose.project';
export const LABEL_SERVICE = 'com.docker.compose.service';

/** Why the engine at `url` does not answer, and what to do about it. */
export function unreachableReason(url: string, err: unknown): string {
  const e = err as { code?: string; message?: string };
  const why = e?.message || e?.code || String(err);
  return `Docker engine is not reachable at ${url} (${why}); start dockerd or point DOCKER_HOST / apps.docker_host at a running engine`;
}

export class Engine {
  readonly docker: Docker;

  constructor(
    readonly address: EngineAddress,
    certs?: { ca: Buffer; cert: Buffer; key: Buffer },
  ) {
    // Every option given explicitly: docker-modem would otherwise mix in the daemon's own DOCKER_HOST.
    this.docker = new Docker({
      socketPath: address.socketPath,
      host: address.host,
      port: address.port,
      protocol: address.protocol,
      username: address.username,
      ...(certs ?? {}),
    } as Docker.DockerOptions);
  }

  /** A 503 naming the engine and the address tried (a call that reached an engine that went away). */
  unreachable(err: unknown): ApiError {
    return unavailable(unreachableReason(this.address.url, err));
  }

  /** Maps a transport failure to 503; an engine answer passes through. */
  wrap(err: unknown): unknown {
    const code = (err as { code?: unknown })?.code;
    if (typeof code === 'string' && /^(ENOENT|ECONNREFUSED|ECONNRESET|EACCES|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|ENOTSOCK)$/.test(code))
      return this.unreachable(err);
    return err;
  }

  /** The engine's version; rejects with the transport's error when it does not answer (the driver's probe words it). */
  async version(): Promise<{ version: string; api: string }> {
    const v = await this.docker.version();
    return { version: v.Version, api: v.ApiVersion };
  }

  async containers(filters: Record<string, string[]> = {}): Promise<ContainerSummary[]> {
    let list: Docker.ContainerInfo[];
    try {
      list = await this.docker.listContainers({ all: true, filters: JSON.stringify(filters) });
    } catch (err) {
      throw this.wrap(err);
    }
    return list.map(summaryOf);
  }

  async imageExists(ref: string): Promise<boolean> {
    try {
      await this.docker.getImage(ref).inspect();
      return true;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return false;
      throw this.wrap(err);
    }
  }

  /** Pulls one image, reporting byte progress; rejects with the engine's error (e.g. no registry reachable). */
  async pull(ref: string, onProgress: (p: PullProgress) => void, signal?: AbortSignal): Promise<void> {
    let stream: NodeJS.ReadableStream;
    try {
      stream = (await this.docker.pull(ref, { abortSignal: signal })) as NodeJS.ReadableStream;
    } catch (err) {
      throw this.wrap(err);
    }
    const layers = new Map<string, { current: number; total: number }>();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        (stream as unknown as { destroy?: (e?: Error) => void }).destroy?.(new Error('pull cancelled'));
        reject(new Error('pull cancelled'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.docker.modem.followProgress(
        stream,
        (err: Error | null) => {
          signal?.removeEventListener('abort', onAbort);
          if (err) reject(err);
          else resolve();
        },
        (ev: { status?: string; id?: string; error?: string; progressDetail?: { current?: number; total?: number } }) => {
          if (ev.id && ev.progressDetail && typeof ev.progressDetail.total === 'number' && ev.progressDetail.total > 0) {
            const l = layers.get(ev.id) ?? { current: 0, total: 0 };
            l.total = ev.progressDetail.total;
            // Download and extraction both report; the larger of the two counts as done.
            if (ev.status === 'Downloading') l.current = Math.max(l.current, ev.progressDetail.current ?? 0);
            layers.set(ev.id, l);
          }
          if (ev.id && (ev.status === 'Download complete' || ev.status === 'Pull complete' || ev.status === 'Already exists')) {
            const l = layers.get(ev.id);
            if (l) l.current = l.total;
          }
          let current = 0;
          let total = 0;
          for (const l of layers.values()) {
            current += l.current;
            total += l.total;
          }
          onProgress({ current, total, status: ev.status ?? '' });
        },
      );
    });
  }

  async logs(containerId: string, tail: number): Promise<LogLine[]> {
    try {
      const c = this.docker.getContainer(containerId);
      const info = await c.inspect();
      const buf = (await c.logs({ stdout: true, stderr: true, tail, timestamps: true, follow: false })) as unknown as Buffer;
      return parseLogFrames(Buffer.isBuffer(buf) ? buf : Buffer.from(String(buf)), Boolean(info.Config?.Tty));
    } catch (err) {
      throw this.wrap(err);
    }
  }

  /** The container's state as the engine holds it now (its list may lag an event by a moment); null when it is gone. */
  async liveState(containerId: string): Promise<string | null> {
    try {
      const i = await this.docker.getContainer(containerId).inspect();
      return i.State?.Status ?? null;
    } catch (err) {
      if ((err as { statusCode?: number })?.statusCode === 404) return null;
      throw this.wrap(err);
    }
  }

  async stats(containerId: string): Promise<ContainerStats> {
    try {
      const s = (await this.docker.getContainer(containerId).stats({ stream: false })) as unknown as Record<string, any>;
      return statsOf(s);
    } catch (err) {
      throw this.wrap(err);
    }
  }

  /** Removes what carries the project's label: containers (forced), then networks and volumes. */
  async removeProject(project: string): Promise<void> {
    const filters = JSON.stringify({ label: [`${LABEL_PROJECT}=${project}`] });
    try {
      const cs = await this.docker.listContainers({ all: true, filters });
      for (const c of cs) await this.docker.getContainer(c.Id).remove({ force: true, v: true }).catch(ignore404);
      const nets = await this.docker.listNetworks({ filters });
      for (const n of nets) await this.docker.getNetwork(n.Id).remove().catch(ignore404);
      const vols = await this.docker.listVolumes({ filters });
      for (const v of vols.Volumes ?? []) await this.docker.getVolume(v.Name).remove().catch(ignore404);
    } catch (err) {
      throw this.wrap(err);
    }
  }
}

function ignore404(err: unknown): void {
  if ((err as { statusCode?: number }).statusCode !== 404) throw err;
}

function summaryOf(c: Docker.ContainerInfo): ContainerSummary {
  const labels = c.Labels ?? {};
  const gen = labels[LABEL_GENERATION];
  const ports: PortBinding[] = [];
  for (const p of c.Ports ?? []) {
    if (!p.PublicPort) continue;
    ports.push({ host_ip: p.IP ?? '', host_port: p.PublicPort, container_port: p.PrivatePort, protocol: p.Type });
  }
  return {
    container_id: c.Id,
    name: (c.Names?.[0] ?? '').replace(/^\//, ''),
    image: c.Image,
    state: c.State,
    status: c.Status,
    created_at: new Date(c.Created * 1000).toISOString(),
    project: labels[LABEL_PROJECT] ?? null,
    service: labels[LABEL_SERVICE] ?? null,
    app_id: labels[LABEL_APP] ?? null,
    generation: gen !== undefined && /^\d+$/.test(gen) ? Number(gen) : null,
    ports,
  };
}
