/**
 * The runnable blocks of docs/first-hour.md: each fenced `sh` block whose
 * previous line is `<!-- first-hour: NAME [NAME ...] -->` belongs to those
 * names (a domain, or a step such as `proxy-config`). Unmarked blocks (the
 * `npm start` lines) are for the reader only.
 */

export interface PageBlock {
  names: string[];
  /** 1-based line of the block's first command. */
  line: number;
  text: string;
}

const MARK = /^<!--\s*first-hour:\s*([a-z0-9 -]+?)\s*-->\s*$/;

export function pageBlocks(md: string): PageBlock[] {
  const lines = md.split('\n');
  const out: PageBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = MARK.exec(lines[i]);
    if (!m) continue;
    if (lines[i + 1]?.trim() !== '```sh') throw new Error(`docs/first-hour.md:${i + 1}: a first-hour mark must be followed by a \`\`\`sh fence`);
    const end = lines.findIndex((l, j) => j > i + 1 && l.trim() === '```');
    if (end < 0) throw new Error(`docs/first-hour.md:${i + 2}: the fence is not closed`);
    out.push({ names: m[1].split(/\s+/), line: i + 3, text: lines.slice(i + 2, end).join('\n') });
    i = end;
  }
  return out;
}

/** One script of the blocks of `name`, in page order, each after a comment naming its line. */
export function firstHourScript(md: string, name: string): string {
  const blocks = pageBlocks(md).filter((b) => b.names.includes(name));
  if (!blocks.length) throw new Error(`docs/first-hour.md has no block marked '${name}'`);
  return blocks.map((b) => `# docs/first-hour.md line ${b.line}\n${b.text}\n`).join('\n');
}
