/**
 * Resource documentation (GET/PUT /vms|/lxc|/apps/{id}/docs): one rule for
 * every domain. Replacing stores the text as given; appending adds one entry
 * headed by its timestamp, after a blank line. The whole text stays under
 * 1 MiB (what a request body may carry).
 */
import { badRequest } from './errors.js';

export interface DocsRecord {
  content: string;
  updated_at: string | null;
}

export const MAX_DOCS_BYTES = 1024 * 1024;

/** The documentation after a PUT: `content` replacing `current`, or appended to it as one entry made at `at`. */
export function nextDocs(current: string, content: string, appendEntry: boolean, at: string): string {
  const entry = `## ${at}\n\n${content.replace(/\n+$/, '')}\n`;
  const next = !appendEntry ? content : current ? `${current.replace(/\n+$/, '')}\n\n${entry}` : entry;
  if (Buffer.byteLength(next) > MAX_DOCS_BYTES) {
    throw badRequest(
      appendEntry ? 'the documentation would be over 1 MiB with this entry: replace it instead of appending' : "argument 'content' must be at most 1 MiB",
    );
  }
  return next;
}
