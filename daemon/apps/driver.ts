/**
 * What the apps service needs from the container runtime: the engine (state,
 * images, logs, stats) and compose (bringing a project to its file). The
 * Docker implementation is docker/; nothing above it knows of Docker's API.
 */
import type { Availability } from '../lib/availability.js';

/** A compose project as hostd runs it. */
export interface ProjectRef {
  /** Compose project name (`hostd-<app_id>`). */
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

export interface AppsDriver {
  /** The engine's address as configured (for messages). */
  readonly engineAddress: string;
  /** The engine and compose, as they are now. */
  availability(): Promise<Availability[]>;
  /** Throws 503 naming the engine and its address when it does not answer. */
  ping(): Promise<void>;
  /** Throws 503 naming compose and what to install when it is missing. */
  requireCompose(): Promise<void>;

  containers(opts?: { appId?: string; project?: string }): Promise<ContainerSummary[]>;
  imageExists(ref: string): Promise<boolean>;
  pull(ref: string, onProgress: (p: PullProgress) => void, signal?: AbortSignal): Promise<void>;

  /** `up -d` (or create only), removing orphans, never pulling. */
  up(p: ProjectRef, opts: { start: boolean }, signal?: AbortSignal): Promise<void>;
  /** Compose's validation of the file (nothing is created); 400 when compose refuses it. */
  check(p: ProjectRef): Promise<void>;
  stop(p: ProjectRef): Promise<void>;
  restart(p: ProjectRef): Promise<void>;
  /** Removes the project's containers, networks and volumes (by its labels; the file may be gone). */
  remove(project: string): Promise<void>;

  logs(containerId: string, tail: number): Promise<LogLine[]>;
  stats(containerId: string): Promise<ContainerStats>;
}
