/** `promtool check metrics` (Debian's prometheus package, installed by deploy/install-deps.sh) for the metrics suites. */
import { execFile } from 'node:child_process';

/** `promtool check metrics` on `text`: its exit code and what it printed (it reads stdin). */
export function promtool(text: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const p = execFile('promtool', ['check', 'metrics'], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT')
        return reject(new Error("promtool is not installed (deploy/install-deps.sh installs Debian's prometheus package)"));
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
    p.stdin!.end(text);
  });
}
