/**
 * Task kinds: `<domain>.<resource>.<verb>`, e.g. `vms.vm.create`,
 * `lxc.image.download`, `apps.app.install`, `templates.template.build`. The
 * domain is the registry's name of the domain the task's operation belongs to
 * (api/registry/types.ts `Domain`); resource and verb are lowercase words,
 * hyphenated when they are two (`vms.warm-state.save`). Events and metrics
 * make kinds public: a kind, once released, is not renamed.
 */

/** A task kind of domain `D`. */
export type TaskKind<D extends string = string> = `${D}.${string}.${string}`;

const WORD = '[a-z][a-z0-9]*(?:-[a-z0-9]+)*';
const FORM = new RegExp(`^(${WORD})\\.(${WORD})\\.(${WORD})$`);

/** Why `kind` is not a task kind of one of `domains`, or null when it is. */
export function taskKindProblem(kind: string, domains: readonly string[]): string | null {
  const m = FORM.exec(kind);
  if (!m) return `task kind '${kind}' is not <domain>.<resource>.<verb> (lowercase words, hyphenated)`;
  if (!domains.includes(m[1])) return `task kind '${kind}' names '${m[1]}', which is not a registry domain (${domains.join(', ')})`;
  return null;
}
