/**
 * The search index of the activity log, in two sizes of the same idea: a
 * needle can be a substring of a text only if every 3-character piece of the
 * needle (its trigrams; bigrams too for blocks) occurs in the text. Pieces are
 * hashed to bits:
 *
 * - a row's **signature**: the trigrams of its lowercased summary and target,
 *   in 128 bits (stored with the row's index entries, 22 base64 characters);
 * - a block's **bloom**: the bigrams and trigrams of every row of a block of
 *   64 rows, in 4096 bits (kept in memory, 512 bytes a block: 8 bytes a row).
 *
 * A row or block whose bits do not cover the needle's cannot match and is not
 * read; one that does is a candidate, checked against the real text. There
 * are no false negatives, only candidates that turn out not to match.
 */

export const SIGNATURE_BITS = 128;
export const BLOOM_BITS = 4096;

/** A 32-bit mix of up to three UTF-16 code units (a gram). */
function mix(a: number, b: number, c: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x632be5ab, 0xc2b2ae35) ^ Math.imul(c + 0x27d4eb2f, 0x165667b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h >>> 0;
}

/** Calls `fn` with the hash of every trigram (and, with `bigrams`, every bigram) of `s`. */
export function eachGram(s: string, bigrams: boolean, fn: (h: number) => void): void {
  for (let i = 0; i + 1 < s.length; i++) {
    const a = s.charCodeAt(i);
    const b = s.charCodeAt(i + 1);
    if (bigrams) fn(mix(a, b, 0x10000)); // 0x10000: never a code unit, so bigrams and trigrams do not collide by design
    if (i + 2 < s.length) fn(mix(a, b, s.charCodeAt(i + 2)));
  }
}

export type Signature = Uint32Array; // 4 words

export function signatureOf(texts: string[]): Signature {
  const sig = new Uint32Array(SIGNATURE_BITS / 32);
  for (const t of texts)
    eachGram(t, false, (h) => {
      sig[(h >>> 5) & 3] |= 1 << (h & 31);
    });
  return sig;
}

/** The bits a row's signature must have to possibly contain `needle` (lowercased); all zero under 3 characters. */
export function needleMask(needle: string): Signature {
  return signatureOf([needle]);
}

/** Whether every bit of `mask` is set in `sig` (no bit of the mask is missing). */
export function covers(sig: Signature, mask: Signature): boolean {
  return (mask[0] & ~sig[0]) === 0 && (mask[1] & ~sig[1]) === 0 && (mask[2] & ~sig[2]) === 0 && (mask[3] & ~sig[3]) === 0;
}

export function encodeSignature(sig: Signature): string {
  const b = Buffer.alloc(SIGNATURE_BITS / 8);
  for (let i = 0; i < 4; i++) b.writeUInt32LE(sig[i], i * 4);
  return b.toString('base64url');
}

export function decodeSignature(s: string): Signature {
  const b = Buffer.from(s, 'base64url');
  if (b.length !== SIGNATURE_BITS / 8) return new Uint32Array([~0, ~0, ~0, ~0]); // unreadable: a candidate
  const sig = new Uint32Array(4);
  for (let i = 0; i < 4; i++) sig[i] = b.readUInt32LE(i * 4);
  return sig;
}

/** A block's bloom of bigrams and trigrams. */
export class Bloom {
  readonly bits: Uint32Array;

  constructor(bits?: Uint32Array) {
    this.bits = bits ?? new Uint32Array(BLOOM_BITS / 32);
  }

  add(text: string): void {
    eachGram(text, true, (h) => {
      this.bits[(h >>> 5) & (BLOOM_BITS / 32 - 1)] |= 1 << (h & 31);
    });
  }

  /** Whether every gram of `needle` may be in the block (always true for a needle of one character). */
  mayContain(needleHashes: number[]): boolean {
    for (const h of needleHashes) if ((this.bits[(h >>> 5) & (BLOOM_BITS / 32 - 1)] & (1 << (h & 31))) === 0) return false;
    return true;
  }

  encode(): string {
    const b = Buffer.alloc(BLOOM_BITS / 8);
    for (let i = 0; i < this.bits.length; i++) b.writeUInt32LE(this.bits[i], i * 4);
    return b.toString('base64');
  }

  static decode(s: string): Bloom {
    const b = Buffer.from(s, 'base64');
    if (b.length !== BLOOM_BITS / 8) return Bloom.full();
    const bits = new Uint32Array(BLOOM_BITS / 32);
    for (let i = 0; i < bits.length; i++) bits[i] = b.readUInt32LE(i * 4);
    return new Bloom(bits);
  }

  /** A bloom that matches everything (a block whose bloom was lost). */
  static full(): Bloom {
    return new Bloom(new Uint32Array(BLOOM_BITS / 32).fill(~0));
  }
}

/** The gram hashes of a needle, for `Bloom.mayContain`. */
export function needleHashes(needle: string): number[] {
  const out: number[] = [];
  eachGram(needle, true, (h) => out.push(h));
  return out;
}
