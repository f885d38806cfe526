/**
 * POST /vms/{id}/exec through the real qemu-guest-agent of the test guest:
 * each stream is cut at the shared cap (1 MiB) in the guest, `truncated` says
 * so, the exit status is the command's own, and a timeout ends the command's
 * whole process group while it floods (docs/vms.md, "Exec output"). The
 * guest resumes the shared warm state (test/helpers/vms-shared.ts): exec is
 * not about how the guest started.
 */
import crypto from 'node:crypto';
import { expect } from 'chai';
import { EXEC_STREAM_CAP_BYTES } from '../../../daemon/lib/exec-output.js';
import { api, requireVmsRuntime, ok, sh, type VmsEnv } from '../../helpers/vms-fixture.js';
import { leaseSharedVms, type VmsLease } from '../../helpers/vms-shared.js';

const MiB = 1024 * 1024;

describe('vms runtime: exec output bounded per stream (QEMU guest agent)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let lease: VmsLease | undefined;

  before(async function () {
    await requireVmsRuntime(this);
    lease = await leaseSharedVms();
    e = lease.e;
    await lease.resume(310, 'exec');
  });

  after(async function () {
    await lease?.release();
  });

  const exec = (command: string, timeout = 600) => ok(e, 'POST', '/vms/310/exec', { command, timeout_seconds: timeout });

  it('answers normal output unchanged, with the exit code, not truncated', async () => {
    const r = await exec("printf 'out\\n\\303\\251\\342\\202\\254\\n'; echo err >&2; exit 3");
    expect(r).to.deep.include({ vmid: 310, exit_code: 3, stdout: 'out\né€\n', stderr: 'err\n', timed_out: false, truncated: false });
    expect(r.duration_ms).to.be.a('number');
    expect(Object.keys(r).sort()).to.deep.equal(['duration_ms', 'exit_code', 'stderr', 'stdout', 'timed_out', 'truncated', 'vmid']);
    const exact = await exec(`head -c ${EXEC_STREAM_CAP_BYTES} /dev/zero | tr '\\0' x`);
    expect([exact.stdout.length, exact.truncated, exact.exit_code]).to.deep.equal([EXEC_STREAM_CAP_BYTES, false, 0]);
  });

  it('cuts a stdout flood to exactly the cap, says truncated, and keeps the exit code and stderr', async () => {
    const r = await exec(`head -c ${64 * MiB} /dev/zero | tr '\\0' x; echo done >&2; exit 5`);
    expect(r.stdout.length).to.equal(EXEC_STREAM_CAP_BYTES);
    expect(/^x+$/.test(r.stdout)).to.equal(true);
    expect(r).to.deep.include({ stderr: 'done\n', exit_code: 5, truncated: true, timed_out: false });
  });

  it('cuts a stderr flood on its own, the other stream whole', async () => {
    const r = await exec(`echo small; head -c ${8 * MiB} /dev/zero | tr '\\0' y >&2`);
    expect(r.stdout).to.equal('small\n');
    expect(r.stderr.length).to.equal(EXEC_STREAM_CAP_BYTES);
    expect(r).to.deep.include({ exit_code: 0, truncated: true, timed_out: false });
  });

  it('honours a short timeout while the command floods: timed_out, no exit code, and nothing of it left running', async () => {
    const marker = `hostd-flood-${crypto.randomBytes(4).toString('hex')}`;
    // A shell loop piped on: killing only the first process would leave the rest running.
    const r = await exec(`while :; do echo ${marker}; done | cat`, 3);
    expect(r).to.deep.include({ exit_code: null, timed_out: true });
    expect(r.stdout.length).to.be.at.most(EXEC_STREAM_CAP_BYTES);
    expect(
      r.stdout
        .split('\n')
        .slice(0, -1)
        .every((l: string) => l === marker),
    ).to.equal(true);
    expect((await sh(e, 310, `ps -eo args | grep -c "[${marker[0]}]${marker.slice(1)}" || true`)).trim()).to.equal('0');
  });

  it('writes one activity row per exec that says when the output was cut', async () => {
    const rows = (await api(e, 'GET', '/activity?limit=200')).body.events.filter((x: any) => x.target === 'vms/310' && /^Command run/.test(x.summary));
    expect(rows.some((x: any) => x.summary === "Command run in VM 310 'exec' (exit 5), output cut" && x.metadata.truncated === true)).to.equal(true);
    expect(rows.some((x: any) => x.summary === "Command run in VM 310 'exec' (exit 3)" && x.metadata.truncated === false)).to.equal(true);
  });
});
