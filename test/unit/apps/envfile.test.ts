/**
 * Env files read by hostd with compose's dotenv rules (daemon/apps/compose/envfile.ts):
 * compose would resolve names and ${VAR} from its own environment, which is hostd's.
 */
import { expect } from 'chai';
import { parseEnvFile } from '../../../daemon/apps/compose/envfile.js';
import { rejectsApi } from '../../helpers/expect.js';

const parse = (text: string, env: Record<string, string> = { HOSTD_APP_ID: 'app1' }) => Object.fromEntries(parseEnvFile(text, env, 'f'));

describe('apps: env files', () => {
  it('reads KEY=VALUE lines as compose 2.x does', () => {
    const text = [
      'export E1=a',
      'E2 = b c  ',
      'E3=x#y',
      'E4=x #y',
      'E5="q\\nr $$ ${U:-u} \\"in\\" \\\\ \\$E"',
      "E6='s ${U} $$'",
      'E7: yaml',
      'E8=',
      '  # comment',
      'E10="multi',
      'line"  # after',
      'E11=${E1}-z',
      'E12=a\\tb',
      'E13=pa$1word and $',
      'E14=${HOSTD_APP_ID}',
      '',
    ].join('\n');
    expect(parse(text)).to.deep.equal({
      E1: 'a',
      E2: 'b c',
      E3: 'x#y',
      E4: 'x',
      E5: 'q\nr $ u "in" \\ $E',
      E6: 's ${U} $$',
      E7: 'yaml',
      E8: '',
      E10: 'multi\nline',
      E11: 'a-z',
      E12: 'a\\tb',
      E13: 'pa$1word and $',
      E14: 'app1',
    });
  });

  it("never takes a value from hostd's environment: a name alone stays unset, an unknown ${VAR} is empty", () => {
    // What compose (run by hostd) would have filled in from its own environment.
    expect(parse('PATH\nDOCKER_HOST\nA=${DOCKER_HOST}|${HOME}|$PATH\n')).to.deep.equal({ A: '||' });
    // And a file that sets PATH or HOME keeps its own values.
    expect(parse('PATH=/app/bin\nHOME=/app\n')).to.deep.equal({ PATH: '/app/bin', HOME: '/app' });
  });

  it('names the file and line of what it cannot read, never a value', async () => {
    const bad = (text: string, msg: string) => rejectsApi((async () => parse(text))(), 400, msg);
    await bad('A=1\nB="unterminated secret\n', "f: line 2: the quoted value of 'B' is not terminated");
    await bad('A-B=1\n', "f: line 1: unexpected character '-' in a variable name");
    await bad('=value\n', 'f: line 1: a variable name is missing');
  });
});
