/**
 * The apps domain's small pure parts: the Docker driver's parsers (engine
 * address, log frames, stats, compose's errors), the `apps:` settings, app ids
 * and compose project names (no two apps share a container name), folder
 * sub-paths and container paths, and the bundled templates.
 */
import { expect } from 'chai';
import { engineAddress } from '../../../daemon/apps/docker/address.js';
import { composeError } from '../../../daemon/apps/docker/compose.js';
import { parseLogFrames, statsOf } from '../../../daemon/apps/docker/parse.js';
import { subPathSegments } from '../../../daemon/apps/mounts.js';
import { projectName, slug } from '../../../daemon/apps/naming.js';
import { parseSettings } from '../../../daemon/apps/settings.js';
import { parseTemplate } from '../../../daemon/apps/templates.js';
import { BUNDLED } from '../../../daemon/apps/catalog/bundled.js';
import { getOperation } from '../../../api/registry/index.js';
import { normalContainerPath } from '../../../api/registry/schema.js';
import { validateArgs } from '../../../api/validate.js';
import type { ApiError } from '../../../daemon/lib/errors.js';
import { ProgramError } from '../../../daemon/lib/run.js';
import { rejectsApi } from '../../helpers/expect.js';

const frame = (type: number, text: string) => {
  const body = Buffer.from(text);
  const h = Buffer.alloc(8);
  h[0] = type;
  h.writeUInt32BE(body.length, 4);
  return Buffer.concat([h, body]);
};

describe('apps: engine output parsers', () => {
  it('splits multiplexed log frames into timestamped stdout/stderr lines, joining a line cut across frames', () => {
    const buf = Buffer.concat([
      frame(1, '2024-01-02T03:04:05.000000001Z hello\n'),
      frame(2, '2024-01-02T03:04:06.000000001Z oops\n'),
      frame(1, '2024-01-02T03:04:07.000000001Z par'),
      frame(1, 'tial\n'),
    ]);
    expect(parseLogFrames(buf, false)).to.deep.equal([
      { time: '2024-01-02T03:04:05.000000001Z', text: 'hello', stream: 'stdout' },
      { time: '2024-01-02T03:04:06.000000001Z', text: 'oops', stream: 'stderr' },
      { time: '2024-01-02T03:04:07.000000001Z', text: 'partial', stream: 'stdout' },
    ]);
    expect(parseLogFrames(Buffer.from('2024-01-02T03:04:05Z tty line\r\n'), true)).to.deep.equal([
      { time: '2024-01-02T03:04:05Z', text: 'tty line', stream: 'stdout' },
    ]);
  });

  it('computes stats as docker stats does (cgroup v1 and v2 shapes)', () => {
    const v1 = statsOf({
      read: '2024-01-01T00:00:01Z',
      cpu_stats: { cpu_usage: { total_usage: 300_000_000, percpu_usage: [1, 2] }, system_cpu_usage: 4_000_000_000, online_cpus: 2 },
      precpu_stats: { cpu_usage: { total_usage: 100_000_000 }, system_cpu_usage: 2_000_000_000 },
      memory_stats: { usage: 10_000, limit: 100_000, stats: { total_inactive_file: 2_000 } },
      networks: { eth0: { rx_bytes: 10, tx_bytes: 20, rx_packets: 1, tx_packets: 2 }, eth1: { rx_bytes: 1, tx_bytes: 2, rx_packets: 1, tx_packets: 1 } },
      blkio_stats: {
        io_service_bytes_recursive: [
          { op: 'Read', value: 4096 },
          { op: 'Write', value: 8192 },
          { op: 'Total', value: 12288 },
        ],
      },
      pids_stats: { current: 3 },
    });
    expect(v1).to.deep.equal({
      cpu_percent: 20,
      cpu_total_ns: 300_000_000,
      online_cpus: 2,
      memory: { usage_bytes: 8_000, limit_bytes: 100_000, percent: 8 },
      network: { rx_bytes: 11, tx_bytes: 22, rx_packets: 2, tx_packets: 3 },
      block_io: { read_bytes: 4096, write_bytes: 8192 },
      pids: 3,
      read_at: '2024-01-01T00:00:01Z',
    });
    const v2 = statsOf({
      cpu_stats: { cpu_usage: { total_usage: 5 } },
      precpu_stats: {},
      memory_stats: { usage: 500, limit: 1000, stats: { inactive_file: 100 } },
      blkio_stats: {
        io_service_bytes_recursive: [
          { op: 'read', value: 1 },
          { op: 'write', value: 2 },
        ],
      },
    });
    expect(v2.memory).to.deep.equal({ usage_bytes: 400, limit_bytes: 1000, percent: 40 });
    expect(v2.block_io).to.deep.equal({ read_bytes: 1, write_bytes: 2 });
    expect(v2.cpu_percent).to.equal(0);
  });

  it('finds the engine as the docker CLI does: config key, then DOCKER_HOST, then the system socket', () => {
    expect(engineAddress(undefined, {}).address).to.deep.include({ url: 'unix:///var/run/docker.sock', socketPath: '/var/run/docker.sock' });
    expect(engineAddress(undefined, { DOCKER_HOST: 'unix:///run/d.sock' })).to.deep.include({ source: 'DOCKER_HOST' });
    const c = engineAddress('tcp://10.1.2.3:2375', { DOCKER_HOST: 'unix:///x' });
    expect(c.source).to.equal('config');
    expect(c.address).to.deep.include({ host: '10.1.2.3', port: 2375, protocol: 'http', composeEnv: { DOCKER_HOST: 'tcp://10.1.2.3:2375' } });
    expect(engineAddress('ssh://me@box', {}).address).to.deep.include({ protocol: 'ssh', host: 'box', port: 22, username: 'me' });
    expect(() => engineAddress('ftp://x', {})).to.throw("docker host 'ftp://x' has an unsupported scheme 'ftp:'");
  });

  it('maps compose load errors to 400 and other failures to 500 with compose words', () => {
    const load = composeError(
      new ProgramError('x', 'docker-compose', 15, 'validating /a/compose.json: services.a.mem_limit must be a number or string\n'),
      'up',
    ) as ApiError;
    expect([load.status, load.message]).to.deep.equal([400, "compose refused the app's compose file: services.a.mem_limit must be a number or string"]);
    const run = composeError(
      new ProgramError('x', 'docker-compose', 1, 'Error response from daemon: driver failed programming external connectivity\n'),
      'up',
    ) as ApiError;
    expect([run.status, run.message]).to.deep.equal([
      500,
      'docker compose up failed: Error response from daemon: driver failed programming external connectivity',
    ]);
  });

  it("maps runc's refusal of a sysctl to 400 naming it (the caller's input, not an internal error)", () => {
    const notNs = composeError(
      new ProgramError(
        'x',
        'docker-compose',
        1,
        'Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: sysctl "kernel.core_pattern" is not in a separate kernel namespace: unknown\n',
      ),
      'up',
    ) as ApiError;
    expect([notNs.status, notNs.message]).to.deep.equal([
      400,
      "sysctl 'kernel.core_pattern' is refused by the container runtime: it is not in a separate kernel namespace",
    ]);
    const global = composeError(
      new ProgramError(
        'x',
        'docker-compose',
        1,
        'Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: open /proc/sys/net/core/bpf_jit_enable: no such file or directory: unknown\n',
      ),
      'up',
    ) as ApiError;
    expect([global.status, global.message]).to.deep.equal([
      400,
      "sysctl 'net.core.bpf_jit_enable' cannot be set in the container (no such file or directory): the engine's kernel does not namespace it, so it is the host's own setting",
    ]);
  });
});

describe('apps: settings, names and paths', () => {
  it('validates the apps config section', () => {
    expect(parseSettings(undefined, {}, ['p'])).to.deep.equal({ publishAddress: '0.0.0.0' });
    const s = parseSettings({ templates_dir: 't', publish_address: '127.0.0.1', default_storage_id: 'p' }, { HOSTD_CONFIG: '/etc/hostd/config.yaml' }, ['p']);
    expect(s).to.deep.include({ templatesDir: '/etc/hostd/t', publishAddress: '127.0.0.1', defaultStorageId: 'p' });
    expect(() => parseSettings({ bogus: 1 }, {}, [])).to.throw('config: unknown key apps.bogus');
    expect(() => parseSettings({ publish_address: 'x' }, {}, [])).to.throw('config: apps.publish_address must be an IP address');
    expect(() => parseSettings({ default_storage_id: 'q' }, {}, ['p'])).to.throw("config: apps.default_storage_id 'q' is not a storage pool");
  });

  it('makes app ids from names', () => {
    expect(slug('My Media App!')).to.equal('my-media-app');
    expect(slug('Ünïcode ☃ name')).to.equal('unicode-name');
    expect(slug('!!!')).to.equal('');
    expect(slug('x'.repeat(80))).to.have.length(40);
  });

  it('gives no two apps the same container name, whatever their ids and service names hold', () => {
    // Compose names a container <project>-<service>-<n>; ids and service names both hold '-'.
    const container = (appId: string, service: string) => `${projectName(appId)}-${service}-1`;
    expect(container('a', 'b-web')).to.not.equal(container('a-b', 'web'));
    expect(container('a', 'b-web')).to.equal('hostd_a_app-b-web-1');
    // Compose's rule for project names: lower case letters, digits, '-' and '_', a letter or digit first.
    for (const id of ['a', 'a-b', slug('My Media App!'), 'x'.repeat(40)]) expect(projectName(id)).to.match(/^[a-z0-9][a-z0-9_-]*$/);
  });

  it('confines folder sub-paths and container paths', async () => {
    expect(subPathSegments('a//b/./c/', 'w')).to.deep.equal(['a', 'b', 'c']);
    expect(subPathSegments(undefined, 'w')).to.deep.equal([]);
    const sync = (fn: () => unknown) =>
      new Promise((res, rej) => {
        try {
          res(fn());
        } catch (e) {
          rej(e);
        }
      });
    await rejectsApi(
      sync(() => subPathSegments('a/../../b', 'w')),
      400,
      'w must stay inside the folder',
    );
    await rejectsApi(
      sync(() => subPathSegments('a\\b', 'w')),
      400,
      'w must not contain backslashes',
    );
    expect(normalContainerPath('/data//x/', 'c')).to.equal('/data/x');
    await rejectsApi(
      sync(() => normalContainerPath('/', 'c')),
      400,
      "argument 'c' must not be the container's root",
    );
    // The registry's rule (one for apps and LXC), as dispatch applies it to an install's assignment.
    const install = getOperation('apps_create')!;
    const assign = (container_path: string) =>
      sync(() => validateArgs(install, { template_id: 'custom', compose_content: 'x', folder_assignments: [{ folder_id: 'f', container_path }] }));
    await rejectsApi(
      assign('/a:b'),
      400,
      "argument 'folder_assignments[0].container_path' must be an absolute path inside the container, without control characters, ':', ',' or '..' segments",
    );
    await rejectsApi(
      assign('relative/x'),
      400,
      "argument 'folder_assignments[0].container_path' must be an absolute path inside the container, without control characters, ':', ',' or '..' segments",
    );
    await assign('/data//x/');
  });

  it('parses the bundled templates and names what is wrong in a bad one', async () => {
    expect(BUNDLED.map((b) => parseTemplate(b, 'bundled').template_id)).to.deep.equal(['whoami', 'static-site', 'uptime-kuma']);
    const sync = (fn: () => unknown) =>
      new Promise((res, rej) => {
        try {
          res(fn());
        } catch (e) {
          rej(e);
        }
      });
    await rejectsApi(
      sync(() => parseTemplate({ id: 'custom', text: 'name: x\ncompose: "services: {}"' }, 'directory')),
      400,
      "template 'custom': the file name must be a template id (a-z, 0-9, '-'; not 'custom')",
    );
    // A default name is what an install without `name` uses: the `name` argument's rule.
    for (const bad of ['"a/b"', '".."', '"   "']) {
      await rejectsApi(
        sync(() => parseTemplate({ id: 't', text: `name: x\ndefault_name: ${bad}\ncompose: "services: {a: {image: b}}"` }, 'directory')),
        400,
        "template 't': default_name must be 1-64 characters without control characters, '/' or '\\', not '.' or '..'",
      );
    }
    expect(parseTemplate({ id: 't', text: 'name: x\ndefault_name: " My App "\ncompose: "services: {a: {image: b}}"' }, 'directory').default_name).to.equal(
      'My App',
    );
    await rejectsApi(
      sync(() => parseTemplate({ id: 't', text: 'name: x\nports: [{name: HOSTD_X, container_port: 1, default: 1}]\ncompose: "services: {}"' }, 'directory')),
      400,
      "template 't' ports[0]: name must be an upper-case variable name not starting with HOSTD_",
    );
    await rejectsApi(
      sync(() =>
        parseTemplate(
          { id: 't', text: 'name: x\ndata_folders: [{id: d, service: nope, container_path: /d}]\ncompose: "services: {a: {image: b}}"' },
          'directory',
        ),
      ),
      400,
      "template 't': data folder 'd' names unknown service 'nope'",
    );
  });
});
