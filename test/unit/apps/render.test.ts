/**
 * Rendering the file compose runs (daemon/apps/compose/render.ts): relative
 * binds and named volumes inside the app's data directory, host paths
 * confined on their real path (no link out), folder assignments mounted as
 * they allow, env files read by hostd, hostd's labels on everything.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseCompose } from '../../../daemon/apps/compose/model.js';
import { renderCompose, type ResolvedMount } from '../../../daemon/apps/compose/render.js';
import { rejectsApi } from '../../helpers/expect.js';

describe('apps: rendering the compose file (host paths confined)', () => {
  let dir: string;
  let data: string;
  let files: string;
  let folder: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-apps-render-'));
    data = path.join(dir, 'data');
    files = path.join(dir, 'files');
    folder = path.join(dir, 'folder');
    fs.mkdirSync(data);
    fs.mkdirSync(folder);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const render = (text: string, mounts: ResolvedMount[] = []) =>
    renderCompose(
      {
        app: parseCompose(text, { HOSTD_APP_DATA: data }),
        appId: 'a1',
        generation: 3,
        dataDir: data,
        mounts,
        label: 'compose_content',
        env: { HOSTD_APP_ID: 'a1', HOSTD_APP_DATA: data },
      },
      files,
    );

  it('resolves relative binds into the data directory (created), stores named volumes there, labels everything, escapes $', async () => {
    const out = await render(`services:
  web:
    image: x
    command: ["sh", "-c", "echo $$HOME"]
    labels: [a=b]
    volumes: ["./conf:/conf", "\${HOSTD_APP_DATA}/abs:/abs", "v:/v"]
volumes:
  v: {}
networks:
  n: {}
`);
    const doc = JSON.parse(out.text);
    const realData = fs.realpathSync(data);
    expect(doc.services.web.volumes).to.deep.equal([
      { type: 'bind', source: path.join(realData, 'conf'), target: '/conf', bind: { create_host_path: false } },
      { type: 'bind', source: path.join(realData, 'abs'), target: '/abs', bind: { create_host_path: false } },
      { type: 'volume', source: 'v', target: '/v' },
    ]);
    expect(fs.statSync(path.join(data, 'conf')).isDirectory()).to.equal(true);
    expect(doc.services.web.labels).to.deep.equal({ a: 'b', 'org.hostd.app': 'a1', 'org.hostd.generation': '3' });
    expect(doc.services.web.command).to.deep.equal(['sh', '-c', 'echo $$HOME']);
    expect(doc.volumes.v).to.deep.equal({
      driver: 'local',
      driver_opts: { type: 'none', o: 'bind', device: path.join(realData, 'volumes/v') },
      labels: { 'org.hostd.app': 'a1' },
    });
    expect(fs.statSync(path.join(data, 'volumes/v')).isDirectory()).to.equal(true);
    expect(doc.networks.n).to.deep.equal({ labels: { 'org.hostd.app': 'a1' } });
  });

  it('refuses a bind that leads out of the data directory through a symbolic link', async () => {
    fs.symlinkSync('/etc', path.join(data, 'out'));
    await rejectsApi(
      render('services:\n  a:\n    image: x\n    volumes: ["./out/ssl:/x"]\n'),
      400,
      "compose_content: services.a.volumes[0] is refused: './out/ssl' leads outside the app's data directory through a symbolic link",
    );
  });

  it('binds inside a folder assignment only as it allows (read-only stays read-only; nothing is created there)', async () => {
    const mounts: ResolvedMount[] = [
      { index: 0, folder_id: 'f1', source: fs.realpathSync(folder), container_path: '/media', read_only: true, services: ['a'] },
    ];
    await rejectsApi(
      render(`services:\n  a:\n    image: x\n    volumes: ["${folder}:/f"]\n`, mounts),
      400,
      `compose_content: services.a.volumes[0]: '${folder}' is inside folder assignment 0 (folder 'f1'), which is read-only: mount it read-only`,
    );
    await rejectsApi(
      render(`services:\n  a:\n    image: x\n    volumes: ["${folder}/sub:/f:ro"]\n`, mounts),
      400,
      `compose_content: services.a.volumes[0]: '${folder}/sub' does not exist in folder assignment 0 (folder 'f1')`,
    );
    const doc = JSON.parse((await render(`services:\n  a:\n    image: x\n    volumes: ["${folder}:/f:ro"]\n`, mounts)).text);
    expect(doc.services.a.volumes).to.deep.equal([
      { type: 'bind', source: fs.realpathSync(folder), target: '/f', read_only: true, bind: { create_host_path: false } },
      { type: 'bind', source: fs.realpathSync(folder), target: '/media', read_only: true, bind: { create_host_path: false } },
    ]);
    await rejectsApi(
      render('services:\n  a:\n    image: x\n    volumes: ["./m:/media"]\n', mounts),
      400,
      "folder_assignments[0]: container_path '/media' is already a mount of service 'a'",
    );
  });

  it('reads env files through the opened file into plain environment entries, and refuses one that is a link out', async () => {
    fs.writeFileSync(path.join(data, 'app.env'), 'A=1\nB=${HOSTD_APP_ID}-$$x\nPATH=/app/bin\nINHERIT\n');
    fs.writeFileSync(path.join(data, 'later.env'), 'A=2\nC=3\n');
    const out = await render(
      'services:\n  a:\n    image: x\n    env_file: [app.env, {path: missing.env, required: false}, later.env]\n    environment: [C=env, "INHERIT", D]\n',
    );
    const doc = JSON.parse(out.text);
    // compose reads no env file (it would fill names and ${VAR} from hostd's environment); later files win, environment wins over files.
    expect(doc.services.a.env_file).to.equal(undefined);
    expect(doc.services.a.environment).to.deep.equal({ A: '2', B: 'a1-$$x', PATH: '/app/bin', C: 'env' });
    expect([...out.files.keys()]).to.deep.equal([]);
    fs.symlinkSync('/etc/hostname', path.join(data, 'evil.env'));
    await rejectsApi(
      render('services:\n  a:\n    image: x\n    env_file: evil.env\n'),
      400,
      "compose_content: services.a.env_file[0] is refused: 'evil.env' leads outside the app's data directory through a symbolic link",
    );
    await rejectsApi(
      render('services:\n  a:\n    image: x\n    env_file: gone.env\n'),
      400,
      "compose_content: services.a.env_file[0]: 'gone.env' does not exist in the app's data directory",
    );
  });

  it("drops environment names without a value (compose would take them from hostd's environment)", async () => {
    const doc = JSON.parse((await render('services:\n  a:\n    image: x\n    environment: {DOCKER_HOST: null, PATH: null, KEEP: "1", N: 2}\n')).text);
    expect(doc.services.a.environment).to.deep.equal({ KEEP: '1', N: 2 });
  });
});
