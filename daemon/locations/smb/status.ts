/**
 * What an SMB failure means for the caller, from the NT status or errno the
 * SMB programs print: the host cannot be reached (502), the credentials or
 * guest access were refused (400, naming the arguments), the share does not
 * exist (404). Pure, unit-tested.
 */
import { type ApiError, badGateway, badRequest, notFound } from '../../lib/errors.js';
import type { Remote, ShareEntry } from '../driver.js';

export type SmbFailureKind = 'unreachable' | 'unresolved' | 'credentials' | 'guest-refused' | 'denied' | 'no-share' | 'other';

export interface SmbFailure {
  kind: SmbFailureKind;
  /** The NT status or errno name found in the output, e.g. NT_STATUS_LOGON_FAILURE. */
  status: string | null;
}

const UNREACHABLE = [
  'NT_STATUS_CONNECTION_REFUSED',
  'NT_STATUS_HOST_UNREACHABLE',
  'NT_STATUS_NETWORK_UNREACHABLE',
  'NT_STATUS_IO_TIMEOUT',
  'NT_STATUS_CONNECTION_RESET',
  'NT_STATUS_CONNECTION_DISCONNECTED',
  'NT_STATUS_CONNECTION_ABORTED',
  'NT_STATUS_PORT_UNREACHABLE',
  'NT_STATUS_ADDRESS_NOT_ASSOCIATED',
  'NT_STATUS_INVALID_NETWORK_RESPONSE',
  'NT_STATUS_END_OF_FILE',
];
const CREDENTIALS = [
  'NT_STATUS_LOGON_FAILURE',
  'NT_STATUS_WRONG_PASSWORD',
  'NT_STATUS_NO_SUCH_USER',
  'NT_STATUS_ACCOUNT_DISABLED',
  'NT_STATUS_ACCOUNT_LOCKED_OUT',
  'NT_STATUS_ACCOUNT_RESTRICTION',
  'NT_STATUS_PASSWORD_EXPIRED',
  'NT_STATUS_PASSWORD_MUST_CHANGE',
  'NT_STATUS_INVALID_LOGON_HOURS',
  'NT_STATUS_INVALID_WORKSTATION',
];

/** Classifies smbclient's output (stdout and stderr together). */
export function classifySmbclient(output: string, guest: boolean): SmbFailure {
  const status = /NT_STATUS_[A-Z_]+/.exec(output)?.[0] ?? null;
  if (status) {
    if (UNREACHABLE.includes(status)) return { kind: 'unreachable', status };
    if (CREDENTIALS.includes(status)) return { kind: guest ? 'guest-refused' : 'credentials', status };
    if (status === 'NT_STATUS_BAD_NETWORK_NAME' || status === 'NT_STATUS_OBJECT_NAME_NOT_FOUND') return { kind: 'no-share', status };
    if (status === 'NT_STATUS_ACCESS_DENIED') {
      // Denied at session setup is about the login; at tree connect, about the share.
      if (/session setup failed/i.test(output)) return { kind: guest ? 'guest-refused' : 'credentials', status };
      return { kind: guest ? 'guest-refused' : 'denied', status };
    }
    // The client says UNSUCCESSFUL or NOT_FOUND when the name does not resolve.
    if (
      (status === 'NT_STATUS_UNSUCCESSFUL' || status === 'NT_STATUS_NOT_FOUND' || status === 'NT_STATUS_INVALID_ADDRESS') &&
      /Connection to .* failed/i.test(output)
    ) {
      return { kind: 'unresolved', status };
    }
    if (/Connection to .* failed/i.test(output)) return { kind: 'unreachable', status };
    return { kind: 'other', status };
  }
  if (/Connection to .* failed|Unable to connect|timed out|did not finish within/i.test(output)) return { kind: 'unreachable', status: null };
  return { kind: 'other', status: null };
}

/** The error a caller gets for a failure reaching `remote` (the share is optional: host-only probes). */
export function smbError(f: SmbFailure, host: string, share: string | null, detail: string): ApiError {
  const st = f.status ? ` (${f.status})` : detail ? ` (${detail})` : '';
  const where = share ? `//${host}/${share}` : `//${host}`;
  switch (f.kind) {
    case 'unreachable':
      return badGateway(`cannot reach SMB host '${host}'${st}`);
    case 'unresolved':
      return badGateway(`SMB host '${host}' does not resolve or cannot be reached${st}; give its address`);
    case 'credentials':
      return badRequest(`SMB host '${host}' rejected the 'username' and 'password'${st}`);
    case 'guest-refused':
      return badRequest(`SMB host '${host}' refused guest access to ${where}${st}; give 'username' and 'password'`);
    case 'denied':
      return badRequest(`the user given in 'username' may not access ${where}${st}`);
    case 'no-share':
      return notFound(`share '${share}' does not exist on SMB host '${host}'${st}`);
    default:
      return badGateway(`SMB host '${host}' failed for ${where}${f.status ? ` (${f.status})` : ''}${detail ? `: ${detail}` : ''}`);
  }
}

export const remoteError = (f: SmbFailure, r: Remote, detail: string): ApiError => smbError(f, r.host, r.share, detail);

/** smbclient -L -g output: `Disk|name|comment` lines (other lines are ignored). */
export function parseShareList(out: string): ShareEntry[] {
  const shares: ShareEntry[] = [];
  for (const line of out.split('\n')) {
    const m = /^(Disk|Printer|IPC|Device)\|([^|]*)\|(.*)$/.exec(line.trim());
    if (!m) continue;
    const type = m[1] === 'Disk' ? 'disk' : m[1] === 'Printer' ? 'printer' : m[1] === 'IPC' ? 'ipc' : 'other';
    shares.push({ name: m[2], type, comment: m[3] });
  }
  return shares;
}
