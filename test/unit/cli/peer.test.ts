/**
 * `--peer NODE` on every hostctl command: taken out of the command's words
 * (never from the guest command after `--`), and added by the client to each
 * API call where the API reads arguments.
 */
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { takePeer } from '../../../daemon/cli/hostctl.js';
import { AdminClient } from '../../../daemon/cli/client.js';

describe('hostctl --peer', () => {
  it('is taken from the words before `--`, in either spelling, and needs a member', () => {
    expect(takePeer(['list', '--peer', 'node_b', '--json'])).to.deep.equal({ peerId: 'node_b', rest: ['list', '--json'] });
    expect(takePeer(['exec', '101', '--peer=node_b', '--', 'echo'])).to.deep.equal({ peerId: 'node_b', rest: ['exec', '101', '--', 'echo'] });
    // After `--` it is the guest command's word.
    expect(takePeer(['exec', '101', '--', 'tool', '--peer', 'x'])).to.equal(undefined);
    expect(takePeer(['list'])).to.equal(undefined);
    for (const bad of [
      ['list', '--peer'],
      ['list', '--peer='],
      ['list', '--peer', '--json'],
      ['exec', '1', '--peer', '--', 'ls'],
    ]) {
      expect(takePeer(bad), bad.join(' ')).to.have.property('error').that.includes('--peer needs a member');
    }
  });

  describe('the client', () => {
    let server: http.Server;
    let seen: Array<{ method: string; url: string; body: string }>;
    let client: AdminClient;

    before(async () => {
      server = http.createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          seen.push({ method: req.method!, url: req.url!, body });
          res.setHeader('content-type', 'application/json');
          res.end('{}');
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      client = new AdminClient('', undefined, { url, token: 't' }).onPeer('node_b');
    });
    beforeEach(() => (seen = []));
    after(() => new Promise<void>((r) => server.close(() => r())));

    it('adds peer_id to the query of a GET or DELETE and to the body of the others, unless the call has one', async () => {
      await client.request('GET', '/api/v1/apps');
      await client.request('GET', '/api/v1/apps/a/logs?tail=5');
      await client.request('DELETE', '/api/v1/apps/a');
      await client.request('POST', '/api/v1/apps/a/actions', { action: 'stop' });
      await client.request('POST', '/api/v1/proxy/move', { peer_id: 'node_c' });
      await client.request('POST', '/api/v1/vms/101/start');
      expect(seen.map((s) => [s.method, s.url, s.body])).to.deep.equal([
        ['GET', '/api/v1/apps?peer_id=node_b', ''],
        ['GET', '/api/v1/apps/a/logs?tail=5&peer_id=node_b', ''],
        ['DELETE', '/api/v1/apps/a?peer_id=node_b', ''],
        ['POST', '/api/v1/apps/a/actions', JSON.stringify({ action: 'stop', peer_id: 'node_b' })],
        ['POST', '/api/v1/proxy/move', JSON.stringify({ peer_id: 'node_c' })],
        ['POST', '/api/v1/vms/101/start', JSON.stringify({ peer_id: 'node_b' })],
      ]);
      expect(client.peerId).to.equal('node_b');
    });

    it('leaves what is not the API alone', async () => {
      await client.request('GET', '/admin/cluster/status');
      expect(seen).to.deep.equal([{ method: 'GET', url: '/admin/cluster/status', body: '' }]);
    });
  });
});
