/**
 * What the apps domain needs from its container runtime, and nothing more:
 * the engine (containers, images, logs, stats) and compose (bringing a
 * project to its rendered file). The types are the domain's own; docker/
 * implements them on the Docker engine API and the compose v2 CLI.
 *
 * Availability is the contract's first part: `availability()` reports the
 * engine (`dockerd`) and compose (`docker compose`) as they are now, and the
 * domain asks `ensureAvailable(driver, [...])` before it uses them. The other
 * methods never check availability themselves.
 */
import type { Logger } from 'pino';
import type { RuntimeDriver } from '../lib/availability.js';

/** The names `availability()` reports, and what `ensureAvailable` is asked for. */
export const ENGINE = 'dockerd';
export const COMPOSE = 'docker compose';
export type AppsProgram = typeof ENGINE | typeof COMPOSE;

/** A compose project as hostd runs it. */
export interface ProjectRef {
  /** Compose project name (the app record's `project`). */
  project: string;
  /** The rendered compose file. */
  file: string;
  /** The project directory (the app's data directory). */
  dir: string;
  /** An empty env file: compose reads no `.env` of the data directory. */
  envFile: string;
}

export interface PortBinding {
  host_ip: string;
  host_port: number;
  container_port: number;
  protocol: string;
}

export interface ContainerSummary {
  container_id: string;
  name: string;
  image: string;
  /** created, running, paused, restarting, removing, exited, dead */
  state: string;
  /** The engine's human text, e.g. `Up 3 minutes`. */
  status: string;
  created_at: string;
  /** Compose project and service (labels), when the container belongs to one. */
  project: string | null;
  service: string | null;
  /** hostd's app label, when hostd made the container. */
  app_id: string | null;
  /** hostd's generation label. */
  generation: number | null;
  ports: PortBinding[];
}

export interface PullProgress {
  /** Bytes done and total over the layers seen so far (total 0 when unknown). */
  current: number;
  total: number;
  /** The engine's last status line, e.g. `Downloading`. */
  status: string;
}

export interface LogLine {
  /** RFC 3339, or '' when the engine gave none. */
  time: string;
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ContainerStats {
  cpu_percent: number;
  /** Cumulative CPU time used, in nanoseconds. */
  cpu_total_ns: number;
  online_cpus: number;
  memory: { usage_bytes: number; limit_bytes: number; percent: number };
  network: { rx_bytes: number; tx_bytes: number; rx_packets: number; tx_packets: number };
  block_io: { read_bytes: number; write_bytes: number };
  pids: number;
  read_at: string;
}

/** What the engine said happened to one of hostd's app containers (a hint: the service reads the app's state itself). */
export interface ContainerSignal {
  appId: string;
  project: string;
  /** The engine's action: start, die, stop, pause, unpause, destroy. */
  action: string;
  /** The container's name. */
  container: string;
  /** Its exit code, on `die`. */
  exitCode?: number;
}

/** A running watch on the engine; `stop` ends it. */
export interface EngineWatch {
  stop(): Promise<void>;
}

export interface AppsDriver extends RuntimeDriver {
  // Engine: what runs, and the images it has

  /** Containers on the engine, all of them or those of one app (its label) or one compose project. */
  containers(opts?: { appId?: string; project?: string }): Promise<ContainerSummary[]>;
  imageExists(ref: string): Promise<boolean>;
  /** Pulls one image, reporting byte progress; rejects with the engine's words (no registry reachable, ...). */
  pull(ref: string, onProgress: (p: PullProgress) => void, signal?: AbortSignal): Promise<void>;
  /** Removes the project's containers, networks and volume objects, by its label (the file may be gone). */
  remove(project: string): Promise<void>;

  // Compose: a project brought to its rendered file

  /** `up -d` (or create only), removing orphans, never pulling. */
  up(p: ProjectRef, opts: { start: boolean }, signal?: AbortSignal): Promise<void>;
  /** Compose's validation of the file (nothing is created); 400 when compose refuses it. */
  check(p: ProjectRef): Promise<void>;
  stop(p: ProjectRef): Promise<void>;
  restart(p: ProjectRef): Promise<void>;

  // Observation: what the containers print and use

  logs(containerId: string, tail: number): Promise<LogLine[]>;
  stats(containerId: string): Promise<ContainerStats>;
  /** One container's state as the engine holds it now (null: gone); the list may lag an event by a moment. */
  liveState(container: string): Promise<string | null>;
  /**
   * Watches hostd's app containers on the engine: each change goes to
   * `onSignal`; `onResync` when the watch had to open again (the engine
   * restarted, or was not there): changes meanwhile are unknown.
   */
  watch(onSignal: (s: ContainerSignal) => void, onResync: () => void, log: Logger): EngineWatch;
}
