/**
 * `hostctl events [--follow] [--types ...] [--resource ...] [--task ID] [--cursor C] [--limit N] [--json]`:
 * prints events. Without --follow, the page after the cursor (from the
 * oldest retained without one) and the cursor to go on from; with --follow,
 * every event as it comes (from now without a cursor), resuming by itself
 * after `lagged`.
 */
import { parseArgs } from 'node:util';
import { API_PREFIX } from '../../api/catalog.js';
import { commandGroups } from './groups.js';
import { openSse, type StreamEvent } from './sse.js';

const CONTROL = new Set(['bookmark', 'reset', 'lagged', 'closed']);

function line(e: StreamEvent, json: boolean): string {
  if (json) return JSON.stringify(e);
  return `${e.time}  ${String(e.seq).padStart(6)}  ${e.type.padEnd(16)}  ${e.resource || '-'}  ${e.summary}`;
}

commandGroups.set('events', async (argv, client) => {
  const { values } = parseArgs({
    args: argv,
    options: {
      follow: { type: 'boolean', short: 'f' },
      types: { type: 'string' },
      resource: { type: 'string' },
      task: { type: 'string' },
      cursor: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      'usage: hostctl events [--follow] [--types vms.,tasks.ended] [--resource vms/101] [--task TASK_ID] [--cursor C] [--limit N] [--json]\n',
    );
    return 0;
  }
  const query = (cursor?: string) => {
    const q = new URLSearchParams();
    if (values.types) q.set('types', values.types);
    if (values.resource) q.set('resource', values.resource);
    if (values.task) q.set('task_id', values.task);
    if (cursor) q.set('cursor', cursor);
    return q;
  };
  const json = Boolean(values.json);
  if (!values.follow) {
    const q = query(values.cursor);
    if (values.limit) q.set('limit', values.limit);
    const r = await client.request('GET', `${API_PREFIX}/events?${q}`);
    if (r.status !== 200) {
      process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
      return 1;
    }
    for (const e of r.body.events as StreamEvent[]) process.stdout.write(line(e, json) + '\n');
    process.stderr.write(`next cursor: ${r.body.next_cursor}\n`);
    return 0;
  }
  if (client.remote) {
    process.stderr.write('hostctl: events --follow streams over the local admin socket; over --url, page with `hostctl events --cursor C`\n');
    return 2;
  }
  let cursor = values.cursor;
  for (;;) {
    let again: string | undefined;
    const stream = await openSse(client.socketPath, `${API_PREFIX}/events/stream?${query(cursor)}`, (e) => {
      if (e.type === 'bookmark') {
        cursor = e.cursor;
        return;
      }
      if (CONTROL.has(e.type)) {
        process.stderr.write(`hostctl: ${e.type}: ${e.summary}\n`);
        // lagged: nothing is lost, go on from the last cursor; reset: from what it carries.
        if (e.type === 'lagged' || e.type === 'reset') again = e.cursor;
        return;
      }
      cursor = e.cursor;
      process.stdout.write(line(e, json) + '\n');
    }).catch((err: Error) => err);
    if (stream instanceof Error) {
      process.stderr.write(`hostctl: ${stream.message}\n`);
      return 1;
    }
    await stream.done;
    if (again === undefined) return 0;
    cursor = again;
  }
});
