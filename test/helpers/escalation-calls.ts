/**
 * The calls of the escalation suites that run against a daemon with one
 * token per role: each answer is kept (so that the suite can check after
 * every test that none holds a sentinel's secret), `refused` demands exactly
 * one status and error message, `ok` a status. The daemon and the tokens are
 * read at each call: a suite sets them in its `before` hook.
 */
import { expect } from 'chai';
import type { Reply, TestDaemon } from './daemon.js';

export interface Attempts {
  /** Every answer the attempts got. */
  answers: string[];
  call(who: string, method: string, p: string, body?: unknown): Promise<Reply>;
  /** The attempt fails with exactly this status and message. */
  refused(who: string, method: string, p: string, body: unknown, status: number, error: string | RegExp): Promise<void>;
  ok(who: string, method: string, p: string, body?: unknown, status?: number): Promise<any>;
}

export function attempts(daemon: () => TestDaemon, tokens: () => Record<string, string>): Attempts {
  const answers: string[] = [];
  const call = async (who: string, method: string, p: string, body?: unknown) => {
    const r = await daemon().request(method, `/api/v1${p}`, { token: tokens()[who], body });
    answers.push(r.text);
    return r;
  };
  return {
    answers,
    call,
    async refused(who, method, p, body, status, error) {
      const r = await call(who, method, p, body);
      expect(r.status, `${who} ${method} ${p}: ${r.text}`).to.equal(status);
      expect(Object.keys(r.body ?? {}), r.text).to.deep.equal(['error']);
      if (typeof error === 'string') expect(r.body.error).to.equal(error);
      else expect(r.body.error).to.match(error);
    },
    async ok(who, method, p, body, status = 200) {
      const r = await call(who, method, p, body);
      expect(r.status, `${who} ${method} ${p}: ${r.text}`).to.equal(status);
      return r.body;
    },
  };
}
