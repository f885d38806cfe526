/** Sizes as the VM domain prints them in messages and task logs. */

export const MiB = 1024 ** 2;
export const GiB = 1024 ** 3;

/**
 * `400 MiB`, `1 GiB`, `2.5 GiB`: MiB below one GiB (a whole number of GiB
 * would print a 400 MiB image as "0 GiB"), GiB with at most one decimal above.
 */
export function formatSize(bytes: number): string {
  if (bytes < GiB) return `${Math.round(bytes / MiB)} MiB`;
  const gib = Math.round((bytes / GiB) * 10) / 10;
  return `${gib} GiB`;
}
