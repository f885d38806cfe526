/**
 * `hostctl apps ...`: the apps operations an operator runs most, over the
 * admin socket, with a progress bar for the long ones (pulls and moves).
 *
 *   apps list                                          apps, state, pool, ports
 *   apps templates                                     what can be installed
 *   apps install TEMPLATE [--name N] [--storage POOL] [--file compose.yaml] [--folder FOLDER_ID:/path[:ro]]...
 *   apps start|stop|restart APP
 *   apps logs APP [--tail N]
 *   apps move APP POOL
 *   apps uninstall APP
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { API_PREFIX } from '../../api/catalog.js';
import { commandGroups, groupUsage, type Command } from './groups.js';
import type { AdminClient } from './client.js';
import { watchTask } from './watch.js';
import { errorOut, table } from './output.js';

const out = (text: string) => process.stdout.write(text);

const USAGE = `usage: hostctl apps <command>

  list                                   installed apps with state, pool and ports
  templates                              apps that can be installed
  install TEMPLATE [--name NAME] [--storage POOL] [--file COMPOSE.yaml] [--folder FOLDER_ID:/container/path[:ro]]...
                                         install (TEMPLATE 'custom' with --file); waits for a pull
  start|stop|restart APP                 lifecycle
  logs APP [--tail N]                    trailing log lines of every container
  move APP POOL                          move the app's data to another pool (progress bar)
  uninstall APP                          remove containers, networks, volumes and the data directory
`;

const api = (p: string) => `${API_PREFIX}/apps${p}`;
const enc = encodeURIComponent;

async function waitIfTask(client: AdminClient, body: any): Promise<number> {
  if (body?.task?.task_id) return watchTask(client, body.task.task_id);
  return 0;
}

export const appsCommand: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list': {
      const r = await client.request('GET', api(''));
      if (r.status !== 200) return errorOut(r);
      out(
        table(
          ['APP_ID', 'NAME', 'STATE', 'POOL', 'PORTS'],
          r.body.apps.map((a: any) => [
            a.app_id,
            a.name,
            a.state,
            a.storage_id,
            a.ports.map((p: any) => `${p.host_ip}:${p.host_port}->${p.container_port}/${p.protocol}`).join(' ') || '-',
          ]),
        ),
      );
      return 0;
    }
    case 'templates': {
      const r = await client.request('GET', api('/templates'));
      if (r.status !== 200) return errorOut(r);
      out(
        table(
          ['TEMPLATE', 'NAME', 'IMAGES'],
          r.body.templates.map((t: any) => [t.template_id, t.name, t.images.join(' ')]),
        ),
      );
      for (const bad of r.body.invalid) process.stderr.write(`hostctl: invalid template ${bad.file}: ${bad.error}\n`);
      return 0;
    }
    case 'install': {
      const { values, positionals } = parseArgs({
        args: rest,
        options: { name: { type: 'string' }, storage: { type: 'string' }, file: { type: 'string' }, folder: { type: 'string', multiple: true } },
        allowPositionals: true,
        strict: true,
      });
      if (positionals.length !== 1) {
        process.stderr.write(USAGE);
        return 2;
      }
      const body: Record<string, unknown> = { template_id: positionals[0] };
      if (values.name) body.name = values.name;
      if (values.storage) body.storage_id = values.storage;
      if (values.file) body.compose_content = fs.readFileSync(values.file, 'utf8');
      if (values.folder) {
        body.folder_assignments = values.folder.map((f) => {
          const [folder_id, container_path, mode] = f.split(':');
          if (!folder_id || !container_path || (mode && mode !== 'ro')) throw new Error(`--folder ${f}: expected FOLDER_ID:/container/path[:ro]`);
          return { folder_id, container_path, ...(mode === 'ro' ? { read_only: true } : {}) };
        });
      }
      const r = await client.request('POST', api(''), body);
      if (r.status !== 201) return errorOut(r);
      process.stdout.write(`app ${r.body.app.app_id}: ${r.body.app.state}\n`);
      return waitIfTask(client, r.body);
    }
    case 'start':
    case 'stop':
    case 'restart': {
      if (rest.length !== 1) {
        process.stderr.write(USAGE);
        return 2;
      }
      const r = await client.request('POST', api(`/${enc(rest[0])}/actions`), { action: sub });
      if (r.status !== 200) return errorOut(r);
      process.stdout.write(`app ${r.body.app.app_id}: ${r.body.app.state}\n`);
      return 0;
    }
    case 'logs': {
      const { values, positionals } = parseArgs({ args: rest, options: { tail: { type: 'string' } }, allowPositionals: true, strict: true });
      if (positionals.length !== 1) {
        process.stderr.write(USAGE);
        return 2;
      }
      const q = values.tail ? `?tail=${enc(values.tail)}` : '';
      const r = await client.request('GET', api(`/${enc(positionals[0])}/logs${q}`));
      if (r.status !== 200) return errorOut(r);
      for (const l of r.body.lines) (l.stream === 'stderr' ? process.stderr : process.stdout).write(`${l.service} | ${l.text}\n`);
      return 0;
    }
    case 'move': {
      if (rest.length !== 2) {
        process.stderr.write(USAGE);
        return 2;
      }
      const r = await client.request('POST', api(`/${enc(rest[0])}/move`), { storage_id: rest[1] });
      if (r.status !== 200) return errorOut(r);
      return waitIfTask(client, r.body);
    }
    case 'uninstall': {
      if (rest.length !== 1) {
        process.stderr.write(USAGE);
        return 2;
      }
      const r = await client.request('DELETE', api(`/${enc(rest[0])}`));
      if (r.status !== 200) return errorOut(r);
      process.stdout.write(
        `uninstalled ${r.body.app_id}; removed ${r.body.data_dir}${r.body.folders_kept.length ? `; folders kept: ${r.body.folders_kept.join(', ')}` : ''}\n`,
      );
      return 0;
    }
    default:
      process.stderr.write(USAGE);
      return 2;
  }
};

commandGroups.set('apps', appsCommand);
groupUsage.set('apps', USAGE);
// `hostctl app ...` as Proxmox and Incus users type it: the same commands.
commandGroups.set('app', appsCommand);
groupUsage.set('app', USAGE);
