/**
 * Results as JSON text, without serialising the same thing twice.
 *
 * - `JsonText`: a result that arrived as JSON text (a forwarded call's answer
 *   from the member that ran it). The transports send its text as it is;
 *   anything else that serialises it gets the same JSON (`toJSON`), and
 *   `value()` parses it for code that needs the object.
 * - `jsonOf`: the JSON text of a result. A result that is deeply frozen plain
 *   data (frozen objects and arrays of strings, numbers, booleans and null,
 *   such as the folders list a domain keeps until it changes) cannot change,
 *   so its text is made once and kept for as long as the object lives.
 */
export class JsonText {
  private parsed: unknown;
  private done = false;

  constructor(readonly text: string) {}

  value(): unknown {
    if (!this.done) {
      this.parsed = JSON.parse(this.text);
      this.done = true;
    }
    return this.parsed;
  }

  toJSON(): unknown {
    return this.value();
  }
}

/** The value of a result that may be a JsonText. */
export const resultValue = (v: unknown): unknown => (v instanceof JsonText ? v.value() : v);

const texts = new WeakMap<object, string>();
/** Objects found not to be deeply frozen plain data (they may yet change, or freeze later: checked again). */
const OBJECT_PROTO = Object.prototype;
const ARRAY_PROTO = Array.prototype;

/** Whether `v` is deeply frozen plain data; bounded in depth, so a very deep value is simply not kept. */
function frozenData(v: unknown, depth: number): boolean {
  if (v === null) return true;
  const t = typeof v;
  if (t === 'string' || t === 'boolean') return true;
  if (t === 'number') return Number.isFinite(v);
  if (t !== 'object' || depth > 8 || !Object.isFrozen(v)) return false;
  const proto = Object.getPrototypeOf(v);
  if (proto === ARRAY_PROTO) {
    for (const x of v as unknown[]) if (!frozenData(x, depth + 1)) return false;
    return true;
  }
  if (proto !== OBJECT_PROTO && proto !== null) return false;
  for (const k of Object.keys(v as object)) {
    // A getter could answer differently each time (and `toJSON` would change what is written).
    const d = Object.getOwnPropertyDescriptor(v, k)!;
    if (!('value' in d) || k === 'toJSON' || !frozenData(d.value, depth + 1)) return false;
  }
  return true;
}

/** Whether `v`'s JSON text is kept (see `jsonOf`). */
export function immutable(v: unknown): v is object {
  if (typeof v !== 'object' || v === null) return false;
  if (texts.has(v)) return true;
  if (!frozenData(v, 0)) return false;
  texts.set(v, JSON.stringify(v));
  return true;
}

/** `JSON.stringify(v)`, made once for deeply frozen plain data and for a JsonText. */
export function jsonOf(v: unknown): string {
  if (v instanceof JsonText) return v.text;
  if (immutable(v)) return texts.get(v)!;
  return JSON.stringify(v);
}
