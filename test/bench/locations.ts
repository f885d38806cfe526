/**
 * Listing a directory of 1,000 files on an SMB share: through hostd
 * (`GET /folders/_/contents` with a connection target, the mount route hostd
 * chose) against smbclient listing the same directory directly, both in the
 * same run. smbd, hostd and both clients run in a network namespace made here
 * (smbnetfs needs port 445); nothing leaves it.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { missingForLocations, releaseDataDirMounts, SMB_USER, SmbLab } from '../helpers/locations-smb.js';
import { median, print } from './lib.js';

const FILES = 1000;
const RUNS = Number(process.env.BENCH_LOCATION_RUNS ?? 9);

/** Runs `node -e script` inside the namespace and returns its stdout. */
function nodeIn(ns: string, script: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = spawn('ip', ['netns', 'exec', ns, process.execPath, '--input-type=module', '-e', script], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    c.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`client in ${ns} failed: ${err}`))));
  });
}

export async function locationListing(): Promise<void> {
  const why = await missingForLocations();
  if (why) {
    process.stdout.write(`# locations skipped: ${why}\n`);
    return;
  }
  const lab = new SmbLab();
  let dataDir: string | null = null;
  try {
    await lab.setup();
    await lab.start();
    const dir = path.join(lab.privateDir, 'big');
    fs.mkdirSync(dir);
    for (let i = 0; i < FILES; i++) fs.writeFileSync(path.join(dir, `file-${String(i).padStart(4, '0')}.txt`), `content ${i}\n`);

    const d = await startDaemon({ wrap: lab.wrap, netns: lab.ns });
    dataDir = d.dataDir;
    const tok = await d.token('bench', ['connections.manage', 'connections.read', 'files.read']);
    const made = await d.request('POST', '/api/v1/locations', {
      token: tok,
      body: { name: 'bench', remote: '//127.0.0.1/private', username: SMB_USER, password: lab.password },
    });
    if (made.status !== 201) throw new Error(`location create: ${made.status} ${made.text}`);
    const id = made.body.location.location_id;
    const url = `${d.url}/api/v1/folders/_/contents?target=${encodeURIComponent(JSON.stringify({ kind: 'connection', id, path: 'big' }))}`;

    // hostd: one warm-up, then RUNS timed requests from a client inside the namespace.
    const apiOut = await nodeIn(
      lab.ns,
      `const t=[];for(let i=0;i<=${RUNS};i++){const s=performance.now();const r=await fetch(process.env.U,{headers:{authorization:'Bearer '+process.env.T}});const b=await r.json();if(r.status!==200||b.entries.length!==${FILES})throw new Error('bad listing '+r.status);if(i)t.push(performance.now()-s);}console.log(JSON.stringify(t));`,
      { U: url, T: tok },
    );
    const apiMs = median(JSON.parse(apiOut));

    // smbclient: the same directory listed directly (a new connection each time, as a script would).
    const smbOut = await nodeIn(
      lab.ns,
      `import {spawnSync} from 'node:child_process';const t=[];for(let i=0;i<=${RUNS};i++){const s=performance.now();const r=spawnSync('smbclient',['//127.0.0.1/private','-U','${SMB_USER}','-c','ls big/*'],{input:process.env.P+'\\n',env:{...process.env,PASSWD_FD:'0'}});if(r.status!==0)throw new Error(String(r.stderr));const n=String(r.stdout).split('\\n').filter(l=>/file-\\d+\\.txt/.test(l)).length;if(n!==${FILES})throw new Error('smbclient listed '+n);if(i)t.push(performance.now()-s);}console.log(JSON.stringify(t));`,
      { P: lab.password },
    );
    const smbMs = median(JSON.parse(smbOut));

    print('location_list_1k_ms', apiMs);
    print('smbclient_list_1k_ms', smbMs);
    print('location_list_ratio', apiMs / smbMs);
    process.stdout.write(`# mount route: ${made.body.location.mount_route}; median of ${RUNS} after one warm-up each\n`);
    await d.request('DELETE', `/api/v1/locations/${id}`, { token: tok });
    await d.stop();
  } finally {
    if (dataDir) await releaseDataDirMounts(dataDir);
    await lab.cleanup();
  }
}
