import type { OperationSpec, Schema } from './types.js';
import { arrayOf, bool, dateTime, emptyOr, int, ipv4, nullable, nullableOneOf, object, oneOf, resourceName, str } from './schema.js';

const locationId = { location_id: str('Connected location ID') };

// ---------------------------------------------------------------------------
// Argument rules of this domain. The share address (`remote`) and the user
// and domain names inside `username` have rules whose 400 names the
// character at fault; daemon/locations/addresses.ts checks those.

/**
 * Discovery's `host`: a DNS or NetBIOS name (letters, digits, '.', '-', '_';
 * no '..'; 253 at most) or an IPv4 address, or '' taken as omitted (clients
 * send it for an optional field they leave empty). The empty case is in the
 * pattern rather than an `emptyOr()` so that the 400 keeps the rule's words.
 */
const smbHostOrOmitted = (description: string): Schema<string> =>
  str(description, {
    maxLength: 253,
    pattern: '^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?)?$',
    not: { pattern: '\\.\\.' },
    'x-expect': 'a DNS or NetBIOS host name or an IPv4 address',
    examples: ['127.0.0.1'],
  });

/** An IPv4 address, or '' taken as omitted; a 400 keeps the rule's words. */
const ipv4OrOmitted = (description: string): Schema<string> => ({ ...emptyOr(ipv4(description)), 'x-expect': ipv4()['x-expect'] }) as Schema<string>;

/** Text the SMB programs read line by line: no control character, at most `max` characters. */
const smbText = (description: string, max: number): Schema<string> =>
  str(description, {
    pattern: `^[^\\u0000-\\u001f\\u007f]{0,${max}}$`,
    'x-expect': `at most ${max} characters without control characters`,
  });

const username = (description: string) => smbText(description, 256);
const password = (description: string) => smbText(description, 1024);

// ---------------------------------------------------------------------------
// Results

const location = () =>
  object(
    {
      location_id: str('Connected location ID'),
      name: str('Display name'),
      type: oneOf(['smb'] as const),
      remote: str('The share address, //host/share'),
      host: str('SMB host name or IPv4 address'),
      share: str('Share name'),
      username: nullable(str('User name (DOMAIN\\user when a domain was given); null for guest access')),
      guest: bool('Whether it is mounted as guest'),
      status: oneOf(
        ['mounted', 'disconnected', 'unavailable'] as const,
        'mounted; disconnected (by the user); unavailable (wanted, but the last mount or check failed: last_error says why)',
      ),
      mounted: bool(),
      mount_route: nullableOneOf(['cifs', 'fuse'] as const, 'Route of the current (or last) mount'),
      mount_path: nullable(str("The share's directory on this host while mounted")),
      last_error: nullable(str('Why the last mount or check failed')),
      last_error_at: nullable(dateTime()),
      mounted_at: nullable(dateTime()),
      created_at: dateTime(),
    },
    [
      'location_id',
      'name',
      'type',
      'remote',
      'host',
      'share',
      'username',
      'guest',
      'status',
      'mounted',
      'mount_route',
      'mount_path',
      'last_error',
      'last_error_at',
      'mounted_at',
      'created_at',
    ],
    { title: 'Location' },
  );

const oneLocation = () => object({ location: location() }, ['location']);

const runtime = () =>
  object(
    {
      name: str('Program, or `mount route` (its version is the route new mounts take)'),
      version: nullable(str()),
      available: bool(),
      reason: nullable(str('What is missing and what to install')),
    },
    ['name', 'version', 'available', 'reason'],
    { title: 'Runtime' },
  );

/** The host status (also `hostctl locations host-status --json`). */
const hostStatus = () =>
  object(
    {
      mount_route: nullableOneOf(['cifs', 'fuse'] as const, 'Route new mounts take; null when neither works'),
      route_reason: str('Why that route, or why none'),
      runtimes: arrayOf(runtime()),
      refused: arrayOf(
        object({ location_id: str(), name: str(), reason: str() }, ['location_id', 'name', 'reason']),
        'Locations whose stored address breaks a rule added since they were made: never mounted again',
      ),
    },
    ['mount_route', 'route_reason', 'runtimes', 'refused'],
  );

const shareList = () =>
  object(
    {
      host: str(),
      ip: nullable(str('The address given in ip')),
      username: nullable(str('The user of the probe; null for guest')),
      shares: arrayOf(
        object(
          {
            name: str(),
            type: oneOf(['disk', 'printer', 'ipc', 'other'] as const),
            comment: str(),
          },
          ['name', 'type', 'comment'],
        ),
      ),
    },
    ['host', 'ip', 'username', 'shares'],
    { title: 'ShareList' },
  );

const method = (words: string) => str(`What ${words} did: sent on which interfaces, or why it could not run`);
const hostList = () =>
  object(
    {
      hosts: arrayOf(
        object(
          {
            name: nullable(str('NetBIOS server name, else mDNS instance or host name')),
            addresses: arrayOf(str()),
            workgroup: nullable(str()),
            file_server: bool('Whether it said it is a file server'),
            via: arrayOf(oneOf(['netbios', 'mdns', 'wsd'] as const)),
          },
          ['name', 'addresses', 'workgroup', 'file_server', 'via'],
        ),
      ),
      methods: object({ netbios: method('NetBIOS'), mdns: method('mDNS'), wsd: method('WS-Discovery') }, ['netbios', 'mdns', 'wsd']),
      timeout_ms: int('How long it listened', 0),
      duration_ms: int('How long it took', 0),
    },
    ['hosts', 'methods', 'timeout_ms', 'duration_ms'],
    { title: 'HostList' },
  );

/** A host's shares (with `host`), or the hosts found (without). */
const discovered = <A, B>(a: Schema<A>, b: Schema<B>): Schema<A | B> => ({ type: 'object', oneOf: [a, b] }) as Schema<A | B>;

// ---------------------------------------------------------------------------

export const operations = [
  {
    name: 'locations_list',
    domain: 'locations',
    method: 'GET',
    path: '/locations',
    scopes: ['connections.read'],
    hints: ['RO'],
    summary: 'List connected network shares.',
    category: 'share',
    params: {},
    args: {},
    result: object({ locations: arrayOf(location(), 'By name'), host: hostStatus() }, ['locations', 'host']),
  },
  {
    name: 'locations_create',
    domain: 'locations',
    method: 'POST',
    path: '/locations',
    scopes: ['connections.manage'],
    hints: [],
    summary: 'Connect and mount a share.',
    category: 'share',
    params: {},
    args: {
      name: resourceName('Display name'),
      remote: str('Share address of the form //<host>/<share> or <host>/<share>'),
      type: str('Location type; default smb, the only type mounted'),
      username: username('Username; omit with password for guest access'),
      password: password('Password; stored in the secret store, never echoed'),
    },
    required: ['name', 'remote'],
    result: oneLocation(),
  },
  {
    name: 'locations_discover',
    domain: 'locations',
    method: 'POST',
    path: '/locations/discover',
    scopes: ['connections.read'],
    hints: ['RO'],
    summary: "Discover SMB hosts, or list one host's shares.",
    category: 'share',
    params: {},
    args: {
      host: smbHostOrOmitted("Omit to discover hosts on the local network; set to list that host's shares"),
      ip: ipv4OrOmitted('IP address used when the host name does not resolve'),
      username: username('Username for the probe'),
      password: password('Password used for the probe only, never stored or echoed'),
    },
    result: discovered(shareList(), hostList()),
  },
  {
    name: 'locations_get',
    domain: 'locations',
    method: 'GET',
    path: '/locations/{location_id}',
    scopes: ['connections.read'],
    hints: ['RO'],
    summary: 'Get a location.',
    category: 'share',
    params: locationId,
    args: {},
    result: oneLocation(),
  },
  {
    name: 'locations_disconnect',
    domain: 'locations',
    method: 'POST',
    path: '/locations/{location_id}/disconnect',
    scopes: ['connections.manage'],
    hints: ['IDEM'],
    summary: 'Unmount.',
    category: 'share',
    params: locationId,
    args: {},
    result: oneLocation(),
  },
  {
    name: 'locations_reconnect',
    domain: 'locations',
    method: 'POST',
    path: '/locations/{location_id}/reconnect',
    scopes: ['connections.manage'],
    hints: ['IDEM'],
    summary: 'Mount again.',
    category: 'share',
    params: locationId,
    args: {},
    result: oneLocation(),
  },
  {
    name: 'locations_delete',
    domain: 'locations',
    method: 'DELETE',
    path: '/locations/{location_id}',
    scopes: ['connections.manage'],
    hints: ['DEL'],
    summary: 'Remove the location and its stored credentials.',
    category: 'share',
    params: locationId,
    args: {},
    result: object({ location: location(), deleted: bool('Always true') }, ['location', 'deleted']),
  },
] as const satisfies readonly OperationSpec[];
