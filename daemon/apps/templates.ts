/**
 * The catalog of installable apps: templates bundled with hostd plus the
 * `*.yaml` files of the directory the config names (`apps.templates_dir`),
 * read on every listing so that a new file shows up without a restart. A
 * directory template with the id of a bundled one replaces it.
 *
 * A template is a compose file with parameters: a default name, the ports it
 * publishes (host ports hostd picks at install: the default when free, else
 * the next free one) and the data folders a folder assignment can fill
 * (`mount_point_id`). See docs/apps.md for the file format.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import YAML from 'yaml';
import { badRequest, errnoCode, notFound } from '../lib/errors.js';
import { parseCompose } from './compose/model.js';
import { BUNDLED, type TemplateSource } from './catalog/bundled.js';

export interface TemplatePort {
  /** The variable the compose file uses for the host port, e.g. WEB_PORT. */
  name: string;
  container_port: number;
  protocol: 'tcp' | 'udp';
  /** Preferred host port. */
  default: number;
  description: string;
}

export interface TemplateFolder {
  /** What `mount_point_id` names. */
  id: string;
  service: string;
  container_path: string;
  read_only: boolean;
  description: string;
}

export interface AppTemplate {
  template_id: string;
  name: string;
  description: string;
  source: 'bundled' | 'directory';
  /** The app name used when the install gives none. */
  default_name: string;
  ports: TemplatePort[];
  data_folders: TemplateFolder[];
  images: string[];
  services: string[];
  /** The compose file, with ${VARIABLE} references to its parameters and hostd's variables. */
  compose: string;
}

export type { TemplateSource } from './catalog/bundled.js';

export const TEMPLATE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const CUSTOM = 'custom';

/** The variables hostd sets for every app; a template or custom file may use them. */
export const BUILTIN_VARIABLES = ['HOSTD_APP_ID', 'HOSTD_APP_NAME', 'HOSTD_APP_DATA', 'HOSTD_PUBLISH_ADDRESS'] as const;

function field(m: Record<string, unknown>, key: string, where: string, kind: 'string' | 'number' | 'boolean', optional = false): any {
  const v = m[key];
  if (v === undefined && optional) return undefined;
  if (typeof v !== kind) throw badRequest(`${where}: '${key}' must be a ${kind}`);
  return v;
}

/** A template's default app name (trimmed), by the rule of the install's `name` argument (the registry's resourceName, 64 at most). */
function defaultName(v: string, where: string): string {
  const name = v.trim();
  if (!name || [...name].length > 64 || /[\u0000-\u001f\u007f-\u009f/\\]/.test(name) || name === '.' || name === '..') {
    throw badRequest(`${where}: default_name must be 1-64 characters without control characters, '/' or '\\', not '.' or '..'`);
  }
  return name;
}

/** Parses one template file; throws 400 naming what is wrong. */
export function parseTemplate(src: TemplateSource, source: AppTemplate['source']): AppTemplate {
  const where = `template '${src.id}'`;
  if (!TEMPLATE_ID.test(src.id) || src.id === CUSTOM) throw badRequest(`${where}: the file name must be a template id (a-z, 0-9, '-'; not 'custom')`);
  let m: unknown;
  try {
    m = YAML.parse(src.text, { uniqueKeys: true });
  } catch (err) {
    throw badRequest(`${where} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (!m || typeof m !== 'object' || Array.isArray(m)) throw badRequest(`${where} must be a mapping`);
  const t = m as Record<string, unknown>;
  for (const k of Object.keys(t))
    if (!['name', 'description', 'default_name', 'ports', 'data_folders', 'compose'].includes(k)) throw badRequest(`${where}: unknown key '${k}'`);
  const ports: TemplatePort[] = [];
  for (const [i, p] of ((t.ports ?? []) as unknown[]).entries()) {
    const w = `${where} ports[${i}]`;
    if (!p || typeof p !== 'object') throw badRequest(`${w} must be a mapping`);
    const pm = p as Record<string, unknown>;
    const name = field(pm, 'name', w, 'string');
    if (!/^[A-Z][A-Z0-9_]*$/.test(name) || name.startsWith('HOSTD_'))
      throw badRequest(`${w}: name must be an upper-case variable name not starting with HOSTD_`);
    const proto = pm.protocol ?? 'tcp';
    if (proto !== 'tcp' && proto !== 'udp') throw badRequest(`${w}: protocol must be tcp or udp`);
    const def = field(pm, 'default', w, 'number');
    const cport = field(pm, 'container_port', w, 'number');
    for (const [k, v] of [
      ['default', def],
      ['container_port', cport],
    ] as const)
      if (!Number.isInteger(v) || v < 1 || v > 65535) throw badRequest(`${w}: ${k} must be a port 1-65535`);
    ports.push({ name, container_port: cport, protocol: proto, default: def, description: field(pm, 'description', w, 'string', true) ?? '' });
  }
  const folders: TemplateFolder[] = [];
  for (const [i, f] of ((t.data_folders ?? []) as unknown[]).entries()) {
    const w = `${where} data_folders[${i}]`;
    if (!f || typeof f !== 'object') throw badRequest(`${w} must be a mapping`);
    const fm = f as Record<string, unknown>;
    const id = field(fm, 'id', w, 'string');
    const cpath = field(fm, 'container_path', w, 'string');
    if (!cpath.startsWith('/')) throw badRequest(`${w}: container_path must be absolute`);
    folders.push({
      id,
      service: field(fm, 'service', w, 'string'),
      container_path: cpath,
      read_only: field(fm, 'read_only', w, 'boolean', true) ?? false,
      description: field(fm, 'description', w, 'string', true) ?? '',
    });
  }
  const compose = field(t, 'compose', where, 'string');
  // Checked now with placeholder values, so that a broken template is never offered.
  const env: Record<string, string> = { HOSTD_APP_ID: src.id, HOSTD_APP_NAME: src.id, HOSTD_APP_DATA: '/nonexistent', HOSTD_PUBLISH_ADDRESS: '0.0.0.0' };
  for (const p of ports) env[p.name] = String(p.default);
  const parsed = parseCompose(compose, env, where);
  for (const f of folders) if (!parsed.doc.services[f.service]) throw badRequest(`${where}: data folder '${f.id}' names unknown service '${f.service}'`);
  return {
    template_id: src.id,
    name: field(t, 'name', where, 'string'),
    description: field(t, 'description', where, 'string', true) ?? '',
    source,
    default_name: defaultName(field(t, 'default_name', where, 'string', true) ?? src.id, where),
    ports,
    data_folders: folders,
    images: [...new Set(parsed.images.map((i) => i.image))],
    services: Object.keys(parsed.doc.services),
    compose,
  };
}

export interface Catalog {
  templates: AppTemplate[];
  /** Files of the directory that are not valid templates, with why. */
  invalid: Array<{ file: string; error: string }>;
}

export class TemplateCatalog {
  private readonly bundled: AppTemplate[];

  constructor(private readonly dir: string | undefined) {
    this.bundled = BUNDLED.map((s) => parseTemplate(s, 'bundled'));
  }

  async load(): Promise<Catalog> {
    const byId = new Map(this.bundled.map((t) => [t.template_id, t]));
    const invalid: Catalog['invalid'] = [];
    if (this.dir) {
      let names: string[] = [];
      try {
        names = (await fs.readdir(this.dir)).filter((n) => /\.ya?ml$/.test(n)).sort();
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') throw err;
        invalid.push({ file: this.dir, error: 'the templates directory does not exist' });
      }
      for (const n of names) {
        const file = path.join(this.dir, n);
        try {
          const text = await fs.readFile(file, 'utf8');
          byId.set(n.replace(/\.ya?ml$/, ''), parseTemplate({ id: n.replace(/\.ya?ml$/, ''), text }, 'directory'));
        } catch (err) {
          invalid.push({ file, error: (err as Error).message });
        }
      }
    }
    return { templates: [...byId.values()].sort((a, b) => a.template_id.localeCompare(b.template_id)), invalid };
  }

  async get(id: string): Promise<AppTemplate> {
    const c = await this.load();
    const t = c.templates.find((x) => x.template_id === id);
    if (!t) {
      const bad = c.invalid.find((x) => path.basename(x.file).replace(/\.ya?ml$/, '') === id);
      if (bad) throw badRequest(`template '${id}' is not valid: ${bad.error}`);
      throw notFound(`app template '${id}' not found`);
    }
    return t;
  }
}
