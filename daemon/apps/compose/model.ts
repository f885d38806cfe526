/**
 * The compose content of an app, as hostd accepts it: parsed as YAML (anchors
 * and merge keys resolved), interpolated with the app's own variables, and
 * checked against an allowlist of compose keys. What would let a container
 * out of the app's confinement is refused with a 400 naming the key (see
 * docs/apps.md, "What compose content may do"). Pure: no filesystem here; the
 * host paths are confined when the file is rendered (render.ts).
 */
import YAML from 'yaml';
import { badRequest } from '../../lib/errors.js';
import * as checks from './checks.js';
import { childPath, interpolateTree, type Env } from './interpolate.js';

/** A service volume in compose's long syntax, after hostd's checks. */
export type VolumeMount =
  | { type: 'bind'; source: string; target: string; read_only?: boolean; bind?: Record<string, unknown> }
  | { type: 'volume'; source?: string; target: string; read_only?: boolean; volume?: Record<string, unknown> }
  | { type: 'tmpfs'; target: string; tmpfs?: Record<string, unknown> };

export interface ServiceDoc extends Record<string, unknown> {
  image: string;
  volumes?: VolumeMount[];
}

export interface ComposeDoc {
  services: Record<string, ServiceDoc>;
  networks?: Record<string, Record<string, unknown>>;
  volumes?: Record<string, Record<string, unknown>>;
  secrets?: Record<string, Record<string, unknown>>;
  configs?: Record<string, Record<string, unknown>>;
  [extension: `x-${string}`]: unknown;
}

export type PullPolicy = 'always' | 'missing' | 'never';

export interface ImageUse {
  service: string;
  image: string;
  pull: PullPolicy;
}

export interface AppCompose {
  doc: ComposeDoc;
  /** Services compose starts by default (those without profiles). */
  services: string[];
  images: ImageUse[];
}

/** Capabilities Docker grants every container: adding one of these changes nothing. */
export const DEFAULT_CAPS = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'NET_RAW',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);

/** Label prefixes hostd and compose own: an app may not set them. */
const RESERVED_LABELS = ['org.hostd.', 'com.docker.compose.'];

type Check = checks.Check;

const pass: Check = (v) => v;

function refuse(why: string): Check {
  return (_v, where) => {
    throw badRequest(`${where} is refused: ${why}`);
  };
}

const SERVICE_NAME = /^[a-zA-Z0-9._-]+$/;
const RESOURCE_NAME = /^[a-zA-Z0-9._-]+$/;

export function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function mapping(v: unknown, where: string): Record<string, unknown> {
  if (!isMapping(v)) throw badRequest(`${where} must be a mapping`);
  return v;
}

function str(v: unknown, where: string): string {
  if (typeof v === 'number') return String(v);
  if (typeof v !== 'string') throw badRequest(`${where} must be a string`);
  return v;
}

function list(v: unknown, where: string): unknown[] {
  if (!Array.isArray(v)) throw badRequest(`${where} must be a list`);
  return v;
}

/** compose's boolean casting: true/false, or y/yes/true/on and n/no/false/off as text. */
export function toBool(v: unknown, where: string): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string') {
    const t = v.trim().toLowerCase();
    if (['y', 'yes', 'true', 'on'].includes(t)) return true;
    if (['n', 'no', 'false', 'off'].includes(t)) return false;
  }
  throw badRequest(`${where} must be a boolean`);
}

function labels(v: unknown, where: string): unknown {
  const keys: string[] = [];
  if (Array.isArray(v)) {
    for (const [i, e] of v.entries()) keys.push(str(e, `${where}[${i}]`).split('=')[0]);
  } else {
    keys.push(...Object.keys(mapping(v, where)));
  }
  for (const k of keys) {
    if (RESERVED_LABELS.some((p) => k.startsWith(p)))
      throw badRequest(`${where}: label '${k}' is refused: labels starting with ${RESERVED_LABELS.join(' or ')} belong to hostd and compose`);
  }
  return v;
}

function capAdd(v: unknown, where: string): unknown {
  for (const [i, e] of list(v, where).entries()) {
    const cap = str(e, `${where}[${i}]`).toUpperCase().replace(/^CAP_/, '');
    if (!DEFAULT_CAPS.has(cap)) throw badRequest(`${where}[${i}] is refused: capability '${cap}' is beyond Docker's default set (only those may be listed)`);
  }
  return v;
}

function securityOpt(v: unknown, where: string): unknown {
  for (const [i, e] of list(v, where).entries()) {
    const s = str(e, `${where}[${i}]`).replace(/\s/g, '');
    if (!/^no-new-privileges([:=]true)?$/.test(s))
      throw badRequest(`${where}[${i}] is refused: only 'no-new-privileges' may be set (seccomp, AppArmor and SELinux profiles stay Docker's defaults)`);
  }
  return v;
}

function privileged(v: unknown, where: string): unknown {
  const b = toBool(v, where);
  if (b) throw badRequest(`${where} is refused: a privileged container has full access to the host`);
  return false;
}

function volumesFrom(v: unknown, where: string): unknown {
  for (const [i, e] of list(v, where).entries()) {
    const s = str(e, `${where}[${i}]`);
    if (s.startsWith('container:')) throw badRequest(`${where}[${i}] is refused: '${s}' mounts the volumes of a container outside the app`);
  }
  return v;
}

function extendsCheck(v: unknown, where: string): unknown {
  if (typeof v === 'string') return v;
  const m = mapping(v, where);
  for (const k of Object.keys(m)) {
    if (k === 'file') throw badRequest(`${where}.file is refused: hostd reads no other file than the app's compose content`);
    if (k !== 'service') throw badRequest(`${where}: unknown key '${k}'`);
  }
  return m;
}

function deployCheck(v: unknown, where: string): unknown {
  const m = mapping(v, where);
  if (m.labels !== undefined) labels(m.labels, `${where}.labels`);
  const res = m.resources;
  if (isMapping(res) && isMapping(res.reservations)) {
    if (res.reservations.devices !== undefined) throw badRequest(`${where}.resources.reservations.devices is refused: host devices are not given to apps`);
    if (res.reservations.generic_resources !== undefined)
      throw badRequest(`${where}.resources.reservations.generic_resources is refused: host devices are not given to apps`);
  }
  return m;
}

function pullPolicy(v: unknown, where: string): unknown {
  const s = str(v, where);
  if (!['always', 'missing', 'never', 'if_not_present'].includes(s)) {
    throw badRequest(`${where} must be one of always, missing, never, if_not_present${s === 'build' ? ' (build is not supported: apps run images)' : ''}`);
  }
  return s;
}

function userns(v: unknown, where: string): unknown {
  throw badRequest(`${where} is refused: '${String(v)}' leaves the user namespace Docker gives the container`);
}

/**
 * Service keys hostd accepts, with the check each gets. A key not listed here
 * is refused: a compose key added later is not let through by default.
 * docs/apps.md has a line for every key: refused, checked, or why it is safe.
 */
function serviceKeys(env: Env): Record<string, Check> {
  return {
    // Safe as given (each stays inside the container, its own namespaces or its own cgroup; docs/apps.md says why):
    attach: pass,
    command: pass,
    cpu_count: pass,
    cpu_percent: pass,
    cpu_shares: pass,
    cpu_period: pass,
    cpu_quota: pass,
    cpu_rt_runtime: pass,
    cpu_rt_period: pass,
    cpus: pass,
    depends_on: pass,
    dns: pass,
    dns_opt: pass,
    dns_search: pass,
    domainname: pass,
    entrypoint: pass,
    expose: pass,
    extra_hosts: pass,
    group_add: pass,
    healthcheck: pass,
    hostname: pass,
    init: pass,
    links: pass,
    mac_address: pass,
    mem_limit: pass,
    mem_reservation: pass,
    mem_swappiness: pass,
    memswap_limit: pass,
    oom_kill_disable: pass,
    pids_limit: pass,
    platform: pass,
    profiles: pass,
    read_only: pass,
    restart: pass,
    scale: pass,
    secrets: pass,
    configs: pass,
    shm_size: pass,
    stdin_open: pass,
    stop_grace_period: pass,
    stop_signal: pass,
    tty: pass,
    user: pass,
    working_dir: pass,
    cap_drop: pass,
    // Checked (the rest of each value is compose's to validate):
    image: (v, w) => str(v, w),
    labels,
    extends: extendsCheck,
    deploy: deployCheck,
    pull_policy: pullPolicy,
    privileged,
    cap_add: capAdd,
    security_opt: securityOpt,
    network_mode: checks.networkMode,
    networks: checks.serviceNetworks,
    pid: checks.namespaceMode('pid'),
    ipc: checks.namespaceMode('ipc'),
    uts: checks.namespaceMode('uts'),
    cgroup: checks.namespaceMode('cgroup'),
    userns_mode: userns,
    volumes_from: volumesFrom,
    logging: checks.logging,
    sysctls: checks.sysctls,
    ports: checks.ports(env.HOSTD_PUBLISH_ADDRESS),
    ulimits: checks.ulimits,
    oom_score_adj: checks.oomScoreAdj,
    storage_opt: checks.storageOpt,
    cpuset: checks.cpuset,
    tmpfs: checks.tmpfs,
    isolation: checks.isolation,
    environment: checks.environment,
    // Handled by the renderer (confined to the app's data directory; env files read by hostd):
    volumes: pass,
    env_file: pass,
    // Refused:
    devices: refuse('host devices are not given to apps'),
    device_cgroup_rules: refuse('host devices are not given to apps'),
    gpus: refuse('host devices are not given to apps'),
    blkio_config: refuse('it names host block devices'),
    cgroup_parent: refuse('it places the container outside the cgroup Docker gives it'),
    runtime: refuse('the container runtime stays the engine default'),
    external_links: refuse('it links containers outside the app'),
    build: refuse('build is not supported: apps run images (import or pull them)'),
    develop: refuse('it syncs host files into the container'),
    credential_spec: refuse('it reads host credentials'),
    annotations: refuse(
      "the container runtime reads annotations (runc's org.systemd.property.*, crun's run.oci.*) and they can change the container's confinement",
    ),
    container_name: refuse(
      "container names are shared by every container of the engine (one could take the name of another app's container); compose names each container after the app",
    ),
  };
}

const TOP_KEYS = new Set(['version', 'name', 'services', 'networks', 'volumes', 'secrets', 'configs']);

function checkResourceMap(kind: 'networks' | 'volumes' | 'secrets' | 'configs', v: unknown, where: string): Record<string, Record<string, unknown>> {
  const m = mapping(v, where);
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, defIn] of Object.entries(m)) {
    const w = childPath(where, name);
    if (!RESOURCE_NAME.test(name)) throw badRequest(`${w}: name must be letters, digits, '.', '_' or '-'`);
    const def = defIn === null || defIn === undefined ? {} : mapping(defIn, w);
    for (const [k, val] of Object.entries(def)) {
      const kw = childPath(w, k);
      if (k.startsWith('x-')) continue;
      if (k === 'external') {
        if (toBool(val, kw)) throw badRequest(`${kw} is refused: an app uses only its own ${kind}`);
        continue;
      }
      if (k === 'name') throw badRequest(`${kw} is refused: hostd names the app's ${kind} after the app`);
      if (k === 'labels') {
        labels(val, kw);
        continue;
      }
      if (kind === 'volumes') {
        if (k === 'driver') {
          if (str(val, kw) !== 'local') throw badRequest(`${kw} is refused: app volumes use the local driver (their data lives in the app's data directory)`);
          continue;
        }
        if (k === 'driver_opts') throw badRequest(`${kw} is refused: hostd sets where the volume's data lives (the app's data directory)`);
      } else if (kind === 'networks') {
        if (k === 'driver') {
          if (str(val, kw) !== 'bridge') throw badRequest(`${kw} is refused: app networks are bridge networks`);
          continue;
        }
        if (k === 'driver_opts') throw badRequest(`${kw} is refused: bridge options act on the host's network setup`);
        if (k === 'ipam') {
          const ipam = mapping(val, kw);
          for (const ik of Object.keys(ipam)) {
            if (ik === 'driver' && ipam.driver !== 'default') throw badRequest(`${kw}.driver is refused: only the default IPAM driver`);
            if (ik === 'options') throw badRequest(`${kw}.options is refused: only the default IPAM driver`);
            if (ik === 'config')
              throw badRequest(
                `${kw}.config is refused: an app network's subnet becomes a route on the host, which could take the route of a host network; the engine picks one from its address pools`,
              );
            if (!['driver', 'config'].includes(ik) && !ik.startsWith('x-')) throw badRequest(`${kw}: unknown key '${ik}'`);
          }
          continue;
        }
        if (['internal', 'attachable', 'enable_ipv6'].includes(k)) continue;
      } else {
        // secrets and configs
        if (k === 'file') {
          str(val, kw);
          continue;
        }
        if (k === 'content' && kind === 'configs') continue;
        if (k === 'environment') throw badRequest(`${kw} is refused: it would read hostd's own environment`);
      }
      throw badRequest(`${kw}: key '${k}' is not accepted by hostd for ${kind}`);
    }
    if (kind === 'secrets' || kind === 'configs') {
      if (def.file === undefined && def.content === undefined)
        throw badRequest(`${w} needs a file (inside the app's data directory)${kind === 'configs' ? ' or content' : ''}`);
    }
    out[name] = def;
  }
  return out;
}

const VOLUME_MODES = new Set([
  'ro',
  'rw',
  'z',
  'Z',
  'nocopy',
  'consistent',
  'cached',
  'delegated',
  'private',
  'rprivate',
  'shared',
  'rshared',
  'slave',
  'rslave',
]);

function isPathSource(s: string): boolean {
  return s.startsWith('/') || s.startsWith('.') || s.startsWith('~');
}

function checkPropagation(p: unknown, where: string): void {
  if (p === undefined) return;
  const s = str(p, where);
  if (s !== 'private' && s !== 'rprivate')
    throw badRequest(`${where} is refused: mount propagation '${s}' would let mounts cross between the container and the host`);
}

/** One service volume entry, short or long syntax, to the long syntax. */
export function parseVolume(v: unknown, where: string, declared: Set<string>): VolumeMount {
  let out: VolumeMount;
  if (typeof v === 'string') {
    const parts = v.split(':');
    if (parts.some((p) => p === '') || parts.length > 3) throw badRequest(`${where}: '${v}' is not SOURCE:TARGET[:MODE]`);
    if (parts.length === 1) {
      out = { type: 'volume', target: parts[0] };
    } else {
      const [source, target, modeText] = parts;
      const modes = (modeText ?? '').split(',').filter(Boolean);
      for (const m of modes) if (!VOLUME_MODES.has(m)) throw badRequest(`${where}: unknown volume mode '${m}'`);
      const ro = modes.includes('ro');
      const prop = modes.find((m) => ['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave'].includes(m));
      checkPropagation(prop, where);
      if (isPathSource(source)) {
        const bind: Record<string, unknown> = {};
        if (modes.includes('z') || modes.includes('Z')) bind.selinux = modes.includes('Z') ? 'Z' : 'z';
        out = { type: 'bind', source, target, ...(ro ? { read_only: true } : {}), ...(Object.keys(bind).length ? { bind } : {}) };
      } else {
        out = { type: 'volume', source, target, ...(ro ? { read_only: true } : {}), ...(modes.includes('nocopy') ? { volume: { nocopy: true } } : {}) };
      }
    }
  } else {
    const m = mapping(v, where);
    const type = str(m.type, childPath(where, 'type'));
    const allowed: Record<string, string[]> = {
      bind: ['type', 'source', 'target', 'read_only', 'bind', 'consistency'],
      volume: ['type', 'source', 'target', 'read_only', 'volume', 'consistency'],
      tmpfs: ['type', 'target', 'tmpfs', 'read_only', 'consistency'],
    };
    if (!allowed[type]) throw badRequest(`${childPath(where, 'type')} is refused: '${type}' (hostd accepts bind, volume and tmpfs)`);
    for (const k of Object.keys(m)) {
      if (!allowed[type].includes(k) && !k.startsWith('x-')) throw badRequest(`${childPath(where, k)}: key '${k}' is not accepted for a ${type} mount`);
    }
    const target = str(m.target, childPath(where, 'target'));
    const ro = m.read_only === undefined ? undefined : toBool(m.read_only, childPath(where, 'read_only'));
    if (type === 'bind') {
      const bind = m.bind === undefined ? {} : { ...mapping(m.bind, childPath(where, 'bind')) };
      for (const k of Object.keys(bind)) {
        if (!['propagation', 'create_host_path', 'selinux'].includes(k)) throw badRequest(`${childPath(where, 'bind')}.${k} is not accepted`);
      }
      checkPropagation(bind.propagation, `${childPath(where, 'bind')}.propagation`);
      out = {
        type: 'bind',
        source: str(m.source, childPath(where, 'source')),
        target,
        ...(ro ? { read_only: true } : {}),
        ...(Object.keys(bind).length ? { bind } : {}),
      };
    } else if (type === 'volume') {
      const vol = m.volume === undefined ? {} : { ...mapping(m.volume, childPath(where, 'volume')) };
      for (const k of Object.keys(vol)) {
        if (k === 'subpath') throw badRequest(`${childPath(where, 'volume')}.subpath is refused: mount the volume, or a folder assignment`);
        if (k !== 'nocopy') throw badRequest(`${childPath(where, 'volume')}.${k} is not accepted`);
      }
      out = {
        type: 'volume',
        target,
        ...(m.source !== undefined && m.source !== '' ? { source: str(m.source, childPath(where, 'source')) } : {}),
        ...(ro ? { read_only: true } : {}),
        ...(Object.keys(vol).length ? { volume: vol } : {}),
      };
    } else {
      out = { type: 'tmpfs', target, ...(m.tmpfs !== undefined ? { tmpfs: mapping(m.tmpfs, childPath(where, 'tmpfs')) } : {}) };
    }
  }
  if (!out.target.startsWith('/')) throw badRequest(`${where}: the target '${out.target}' must be an absolute path inside the container`);
  if (out.type === 'bind' && out.source.startsWith('~')) throw badRequest(`${where} is refused: '${out.source}' is outside the app's data directory`);
  if (out.type === 'volume' && out.source !== undefined) {
    if (isPathSource(out.source)) throw badRequest(`${where}: a volume mount's source must be a volume name (use type: bind for a path)`);
    if (!declared.has(out.source)) throw badRequest(`${where}: volume '${out.source}' is not declared under the top-level volumes`);
  }
  return out;
}

/**
 * Parses, interpolates and checks compose content. `label` names the input in
 * messages (`compose_content`, or `template 'x'`). Throws 400.
 */
export function parseCompose(text: string, env: Env, label = 'compose_content'): AppCompose {
  let raw: unknown;
  const docs = YAML.parseAllDocuments(text, { merge: true, uniqueKeys: true, prettyErrors: false });
  const list0 = Array.isArray(docs) ? docs : [docs];
  if (list0.length === 0) throw badRequest(`${label} is empty`);
  if (list0.length !== 1) throw badRequest(`${label} must be one YAML document (found ${list0.length})`);
  const doc0 = list0[0];
  if (doc0.errors.length) {
    const e = doc0.errors[0];
    const at = lineCol(text, e.pos[0]);
    throw badRequest(`${label} is not valid YAML${at}: ${e.message.split('\n')[0]}`);
  }
  try {
    raw = doc0.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    throw badRequest(`${label} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const where = `${label}:`;
  if (!isMapping(raw)) throw badRequest(`${label} must be a YAML mapping with a 'services' key`);
  for (const k of Object.keys(raw)) {
    if (k === 'include') throw badRequest(`${label}: include is refused: hostd reads no other file than the app's compose content`);
    if (!TOP_KEYS.has(k) && !k.startsWith('x-')) throw badRequest(`${label}: unknown top-level key '${k}'`);
  }
  const it = interpolateTree(raw, env, where) as Record<string, unknown>;
  if (it.services === undefined || it.services === null) throw badRequest(`${label} has no services`);
  const servicesIn = mapping(it.services, childPath(where, 'services'));
  if (Object.keys(servicesIn).length === 0) throw badRequest(`${label} has no services`);

  const doc: ComposeDoc = { services: {} };
  for (const kind of ['networks', 'volumes', 'secrets', 'configs'] as const) {
    if (it[kind] !== undefined && it[kind] !== null) doc[kind] = checkResourceMap(kind, it[kind], childPath(where, kind));
  }
  for (const [k, v] of Object.entries(it)) if (k.startsWith('x-')) (doc as unknown as Record<string, unknown>)[k] = v;
  const declaredVolumes = new Set(Object.keys(doc.volumes ?? {}));

  const images: ImageUse[] = [];
  const started: string[] = [];
  const SERVICE_KEYS = serviceKeys(env);
  for (const [name, svcIn] of Object.entries(servicesIn)) {
    const w = childPath(childPath(where, 'services'), name);
    if (!SERVICE_NAME.test(name)) throw badRequest(`${w}: a service name must be letters, digits, '.', '_' or '-'`);
    const svc = mapping(svcIn, w);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(svc)) {
      const kw = childPath(w, k);
      if (k.startsWith('x-')) {
        out[k] = v;
        continue;
      }
      const check = SERVICE_KEYS[k];
      if (!check) throw badRequest(`${kw}: key '${k}' is not a compose service key hostd accepts`);
      out[k] = check(v, kw);
    }
    if (svc.volumes !== undefined)
      out.volumes = list(svc.volumes, childPath(w, 'volumes')).map((v, i) => parseVolume(v, `${childPath(w, 'volumes')}[${i}]`, declaredVolumes));
    if (svc.env_file !== undefined) out.env_file = envFiles(svc.env_file, childPath(w, 'env_file'));
    if (out.oom_kill_disable !== undefined && toBool(out.oom_kill_disable, childPath(w, 'oom_kill_disable')) && !hasMemoryLimit(out)) {
      // Docker's own warning: without a memory limit the host runs out of memory instead.
      throw badRequest(
        `${childPath(w, 'oom_kill_disable')} is refused without a memory limit (mem_limit or deploy.resources.limits.memory): the host would run out of memory instead`,
      );
    }
    doc.services[name] = out as ServiceDoc;
  }
  // Images: a service without one may inherit it through extends (same file).
  for (const [name, svc] of Object.entries(doc.services)) {
    let cur: Record<string, unknown> | undefined = svc;
    const seen = new Set<string>();
    let image: string | undefined;
    let pull: unknown;
    while (cur && !seen.has(JSON.stringify(cur))) {
      seen.add(JSON.stringify(cur));
      image ??= cur.image as string | undefined;
      pull ??= cur.pull_policy;
      const ext: unknown = cur.extends;
      const base: string | undefined = typeof ext === 'string' ? ext : isMapping(ext) ? (ext.service as string | undefined) : undefined;
      cur = base ? doc.services[base] : undefined;
      if (base && !cur) throw badRequest(`${label}: services.${name} extends unknown service '${base}'`);
    }
    if (!image) throw badRequest(`${label}: services.${name} has no image (hostd runs images; build is not supported)`);
    const profiles = svc.profiles;
    if (Array.isArray(profiles) && profiles.length > 0) continue;
    started.push(name);
    const p = pull === undefined || pull === 'if_not_present' ? 'missing' : (pull as PullPolicy);
    images.push({ service: name, image, pull: p });
  }
  return { doc, services: started, images };
}

/** ` at line L, column C` of a character offset (1-based, as editors count). */
function lineCol(text: string, offset: number): string {
  if (!(offset >= 0)) return '';
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const col = offset - before.lastIndexOf('\n');
  return ` at line ${line}, column ${col}`;
}

function hasMemoryLimit(svc: Record<string, unknown>): boolean {
  if (svc.mem_limit !== undefined && svc.mem_limit !== null) return true;
  const d = svc.deploy;
  return (
    isMapping(d) && isMapping(d.resources) && isMapping(d.resources.limits) && d.resources.limits.memory !== undefined && d.resources.limits.memory !== null
  );
}

export interface EnvFileRef {
  path: string;
  required: boolean;
}

function envFiles(v: unknown, where: string): EnvFileRef[] {
  const items = typeof v === 'string' ? [v] : list(v, where);
  return items.map((e, i) => {
    const w = `${where}[${i}]`;
    if (typeof e === 'string') return { path: e, required: true };
    const m = mapping(e, w);
    for (const k of Object.keys(m)) if (!['path', 'required'].includes(k)) throw badRequest(`${w}: unknown key '${k}'`);
    return { path: str(m.path, `${w}.path`), required: m.required === undefined ? true : toBool(m.required, `${w}.required`) };
  });
}
