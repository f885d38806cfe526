/**
 * Redocly plugin: `no-ambiguous-paths` with parameter types. Two templates are
 * ambiguous when they have as many segments and as many parameters, and at
 * every position the segments are equal literals or one of them is a
 * parameter that can take the other's text (Redocly's rule), where an integer
 * parameter cannot take a literal that is not an integer.
 */
const PARAM = /^\{(.+)\}$/;

function integerParams(item, resolve) {
  const out = new Set();
  const lists = [item.parameters ?? []];
  for (const m of ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']) if (item[m]) lists.push(item[m].parameters ?? []);
  for (const list of lists) {
    for (const raw of list) {
      const p = raw && raw.$ref ? resolve(raw).node : raw;
      if (!p || p.in !== 'path') continue;
      const t = p.schema?.type;
      if (t === 'integer' || (Array.isArray(t) && t.includes('integer') && !t.includes('string'))) out.add(p.name);
    }
  }
  return out;
}

function fits(seg, other, ints) {
  const m = PARAM.exec(seg);
  if (!m) return false;
  if (PARAM.test(other)) return true;
  return !ints.has(m[1]) || /^-?\d+$/.test(other);
}

function ambiguous(a, b) {
  if (a.segs.length !== b.segs.length) return false;
  let aVars = 0;
  let bVars = 0;
  for (let i = 0; i < a.segs.length; i++) {
    const x = a.segs[i];
    const y = b.segs[i];
    if (PARAM.test(x)) aVars++;
    if (PARAM.test(y)) bVars++;
    if (x === y) continue;
    if (!fits(x, y, a.ints) && !fits(y, x, b.ints)) return false;
  }
  return aVars === bVars;
}

function NoAmbiguousTypedPaths() {
  return {
    Paths(pathMap, { report, location, resolve }) {
      const seen = [];
      for (const key of Object.keys(pathMap)) {
        const cur = { key, segs: key.split('/'), ints: integerParams(pathMap[key] ?? {}, resolve) };
        const other = seen.find((s) => ambiguous(s, cur));
        if (other) {
          report({
            message: `Paths should resolve unambiguously, also by parameter type. Found two ambiguous paths: \`${other.key}\` and \`${key}\`.`,
            location: location.child([key]).key(),
          });
        }
        seen.push(cur);
      }
    },
  };
}

export default function hostdPlugin() {
  return {
    id: 'hostd',
    rules: { oas3: { 'no-ambiguous-paths': NoAmbiguousTypedPaths } },
  };
}
