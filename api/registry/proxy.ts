import type { OperationSpec, Schema } from './types.js';
import {
  anyObject,
  anyValue,
  arrayOf,
  bool,
  dateTime,
  dnsLabel,
  dnsName,
  emptyOr,
  headerMap,
  int,
  ipv4,
  ipv6,
  nullable,
  object,
  oneOf,
  str,
  strArray,
  strMap,
} from './schema.js';

const domainParam = { domain: str('Base domain name') };
const entryParams = { ...domainParam, subdomain: str('Subdomain (left-most label) of the entry') };

const upstreamArgs = {
  host: str('Upstream IP or hostname; required when no target_id'),
  target_id: str('App, VM or LXC to link'),
  upstream_scheme: oneOf(['http', 'https', ''], 'Upstream scheme; empty auto-detects from the port: 443 gives https, else http'),
  tls_skip_verify: nullable(
    bool(
      'Skip upstream TLS verification; omitted: legacy auto-detection skips verification on port 443; when set it is authoritative; only applied when the effective scheme is https',
    ),
  ),
  header_up: headerMap('Header overrides sent upstream; keys are HTTP tokens; values are proxy configuration tokens; an empty value clears that header'),
} as const;

// ---------------------------------------------------------------------------
// Results: what each operation answers (closed objects; daemon/proxy/* returns these types).

const version = () => int('Replicated configuration version this change made', 0);
/** A duration in milliseconds, with a fraction (schema.ts has integers only). */
const milliseconds = (description: string): Schema<number> => ({ type: 'number', minimum: 0, description }) as Schema<number>;
const nodeId = (what = 'Member that answered') => str(what);

const availability = () =>
  object(
    {
      name: str('Host program'),
      version: nullable(str('Its version as it reports it')),
      available: bool(),
      reason: nullable(str('Why it is unavailable, and what to install')),
    },
    ['name', 'version', 'available', 'reason'],
  );

const entryConfig = () =>
  object(
    {
      subdomain: str(),
      listen_port: int('Listen port', 1, 65535),
      port: int('Upstream port', 1, 65535),
      host: nullable(str('Upstream IP or host name; null when a target_id is set')),
      target_id: nullable(str('App, VM or LXC the entry links; null when a host is set')),
      upstream_scheme: oneOf(['http', 'https', ''] as const),
      tls_skip_verify: nullable(bool()),
      header_up: strMap('Header overrides sent upstream'),
    },
    ['subdomain', 'listen_port', 'port', 'host', 'target_id', 'upstream_scheme', 'tls_skip_verify', 'header_up'],
  );

const acmeConfig = () =>
  object(
    {
      email: str('ACME account email; empty for none'),
      dir_url: str('ACME directory URL; empty for the public production directory'),
      dns_resolvers: nullable(strArray('Resolvers of the DNS-01 propagation precheck')),
    },
    ['email', 'dir_url', 'dns_resolvers'],
  );

const vipConfig = () =>
  object(
    {
      vip: str('Floating IPv4 address'),
      vip_iface: str('Interface it is added to'),
      vip_prefix: int('IPv4 prefix length', 1, 32),
      vip6: nullable(str('Floating IPv6 address')),
      vip6_prefix: nullable(int('IPv6 prefix length', 1, 128)),
    },
    ['vip', 'vip_iface', 'vip_prefix', 'vip6', 'vip6_prefix'],
  );

const proxyConfig = () =>
  object(
    {
      enabled: bool(),
      http3: bool(),
      domains: arrayOf(
        object(
          {
            name: str('Base domain'),
            cert_source: str("'internal' or an ACME DNS provider"),
            entries: arrayOf(entryConfig()),
          },
          ['name', 'cert_source', 'entries'],
        ),
      ),
      acme: nullable(acmeConfig()),
      vip: nullable(vipConfig()),
      dns_upstreams: strArray('Resolvers the DNS responder forwards other names to'),
    },
    ['enabled', 'http3', 'domains', 'acme', 'vip', 'dns_upstreams'],
    { title: 'ProxyConfig' },
  );

const entryView = () =>
  object(
    {
      domain: str('Base domain'),
      subdomain: str(),
      fqdn: str('<subdomain>.<domain>'),
      listen_port: int('Listen port', 1, 65535),
      port: int('Upstream port', 1, 65535),
      host: nullable(str('Upstream IP or host name; null when a target_id is set')),
      target_id: nullable(str('App, VM or LXC the entry links; null when a host is set')),
      upstream_scheme: oneOf(['http', 'https', ''] as const, 'As set; empty auto-detects'),
      effective_scheme: oneOf(['http', 'https'] as const, 'The scheme dialled'),
      tls_skip_verify: nullable(bool('As set')),
      effective_tls_skip_verify: bool('Whether upstream TLS is unverified'),
      header_up: strMap('Header overrides sent upstream'),
    },
    [
      'domain',
      'subdomain',
      'fqdn',
      'listen_port',
      'port',
      'host',
      'target_id',
      'upstream_scheme',
      'effective_scheme',
      'tls_skip_verify',
      'effective_tls_skip_verify',
      'header_up',
    ],
    { title: 'ProxyEntry' },
  );

const domainView = () =>
  object(
    { name: str('Base domain'), cert_source: str("'internal' or an ACME DNS provider"), entries: arrayOf(entryView()) },
    ['name', 'cert_source', 'entries'],
    { title: 'ProxyDomain' },
  );

const applyError = () =>
  nullable(object({ version: int('Configuration version Caddy refused', 0), reason: str("Caddy's reason"), at: dateTime() }, ['version', 'reason', 'at']));

const vipState = () =>
  object(
    {
      claimed: bool('Whether this node carries the floating addresses now'),
      iface: nullable(str()),
      cidrs: strArray('The addresses carried, as addr/prefix'),
      error: nullable(str('Why they are not claimed')),
    },
    ['claimed', 'iface', 'cidrs', 'error'],
  );

const dnsStatus = () =>
  object(
    {
      listen: nullable(str('Where the responder listens (proxy.dns_listen)')),
      running: bool(),
      error: nullable(str('Why it does not run')),
    },
    ['listen', 'running', 'error'],
  );

const caddyLogLine = () =>
  object({ ts: str(), level: str(), logger: str(), msg: str(), fields: anyObject('The rest of the structured line') }, [
    'ts',
    'level',
    'logger',
    'msg',
    'fields',
  ]);

const incidentKind = () => oneOf(['config_refused', 'upstream_failed', 'takeover', 'caddy_exited', 'vip_conflict'] as const);

const certView = () =>
  object(
    {
      domain: str(),
      cert_source: str(),
      subject: str('*.<domain>'),
      issuer: nullable(str()),
      issuer_kind: oneOf(['internal', 'acme'] as const),
      serial: nullable(str()),
      not_before: nullable(dateTime()),
      not_after: nullable(dateTime()),
      managed: bool('Whether Caddy stores a certificate for it'),
      last_error: nullable(str('The last error Caddy logged for it, or why its provider cannot work')),
      storage_issuer: str("The issuer's directory in Caddy's storage"),
    },
    ['domain', 'cert_source', 'subject', 'issuer', 'issuer_kind', 'serial', 'not_before', 'not_after', 'managed', 'last_error'],
  );

const R = {
  configView: () =>
    object(
      {
        holder: nullable(nodeId('Member holding the proxy')),
        epoch: int('Lease epoch', 0),
        holding_here: bool('Whether the member answering holds it'),
        version: int('Configuration version', 0),
        config: proxyConfig(),
      },
      ['holder', 'epoch', 'holding_here', 'version', 'config'],
    ),
  enabled: () =>
    object({ enabled: bool(), version: version(), serving: bool('Whether this node serves now'), holder: nullable(nodeId('Member holding the proxy')) }, [
      'enabled',
      'version',
      'serving',
      'holder',
    ]),
  lease: () =>
    object({ holder: nullable(nodeId('Member holding the proxy')), epoch: int('Lease epoch', 0), holding: bool('Whether the member answering holds it') }, [
      'holder',
      'epoch',
      'holding',
    ]),
  upstreams: () =>
    object(
      {
        upstreams: arrayOf(
          object(
            {
              target_id: str('<kind>:<id>, what an entry names'),
              kind: oneOf(['app', 'vm', 'lxc', 'sandbox'] as const),
              id: str(),
              name: str(),
              state: str(),
              running: bool(),
              addresses: strArray('Addresses the host reaches it on'),
            },
            ['target_id', 'kind', 'id', 'name', 'state', 'running', 'addresses'],
          ),
        ),
        errors: strArray('Sources that did not answer'),
      },
      ['upstreams'],
    ),
  providers: () =>
    object(
      {
        caddy_version: nullable(str()),
        internal: object({ available: bool(), reason: nullable(str()) }, ['available', 'reason']),
        providers: arrayOf(
          object(
            {
              name: str(),
              module: str('Caddy module it needs'),
              available: bool(),
              reason: nullable(str()),
              credentials_stored: bool(),
            },
            ['name', 'module', 'available', 'reason', 'credentials_stored'],
          ),
        ),
      },
      ['caddy_version', 'internal', 'providers'],
    ),
  hostStatus: () =>
    object(
      {
        node_id: nodeId(),
        runtimes: arrayOf(availability()),
        caddy_version: nullable(str()),
        holding: bool(),
        holder: nullable(nodeId('Member holding the proxy')),
        epoch: int('Lease epoch', 0),
        enabled: bool(),
        serving: bool(),
        caddy_running: bool(),
        config_version: int('Replicated configuration version', 0),
        applied_version: nullable(int('Version Caddy serves here', 0)),
        last_apply_error: applyError(),
        listen_host: str('proxy.listen_host of this node'),
        rules: object({ allow_loopback_upstreams: bool(), allow_privileged_listen_ports: bool() }, [
          'allow_loopback_upstreams',
          'allow_privileged_listen_ports',
        ]),
        refused: arrayOf(
          object(
            {
              kind: oneOf(['entry', 'domain', 'dns-upstream'] as const),
              name: str(),
              rule: str('The rule that refuses it'),
              message: str(),
            },
            ['kind', 'name', 'rule', 'message'],
          ),
          "What the rules refuse as refused_on applies them (its settings, its listeners, its addresses): another member's list may differ",
        ),
        refused_on: nodeId('Member whose rules made the refused list (the one answering)'),
        vip: vipState(),
        dns: dnsStatus(),
        missing: strArray('What keeps the proxy from working fully here'),
      },
      [
        'node_id',
        'runtimes',
        'caddy_version',
        'holding',
        'holder',
        'epoch',
        'enabled',
        'serving',
        'caddy_running',
        'config_version',
        'applied_version',
        'last_apply_error',
        'listen_host',
        'rules',
        'refused',
        'refused_on',
        'vip',
        'dns',
        'missing',
      ],
    ),
  credentials: () =>
    object(
      {
        provider: str(),
        keys: strArray('Credential keys stored (never their values)'),
        stored: bool(),
        available: bool('Whether this Caddy build has the provider'),
      },
      ['provider', 'keys', 'stored', 'available'],
    ),
  acme: () => object({ acme: nullable(acmeConfig()), version: version() }, ['acme', 'version']),
  vip: () => object({ vip: nullable(vipConfig()), version: version() }, ['vip', 'version']),
  dns: () => object({ dns_upstreams: strArray(), responder: dnsStatus(), version: version() }, ['dns_upstreams', 'responder', 'version']),
  http3: () => object({ http3: bool(), protocols: arrayOf(oneOf(['h1', 'h2', 'h3'] as const)), version: version() }, ['http3', 'protocols', 'version']),
  certs: () =>
    object(
      {
        node_id: nodeId('The holder that answered'),
        internal_ca: object(
          { root_pem: str('Root certificate of the internal CA (PEM), the same on every member'), sha256: str('SHA-256 of the root (DER), hex') },
          ['root_pem', 'sha256'],
        ),
        certs: arrayOf(certView()),
      },
      ['node_id', 'internal_ca', 'certs'],
    ),
  diagnostics: () =>
    object(
      {
        node_id: nodeId('The holder that answered'),
        collected_at: dateTime(),
        lease: object({ holder: str(), epoch: int('Lease epoch', 0), holding: bool() }, ['holder', 'epoch', 'holding']),
        enabled: bool(),
        serving: bool(),
        caddy: object({ running: bool(), pid: nullable(int()), version: nullable(str()), admin_ok: bool('Whether its admin API answers') }, [
          'running',
          'pid',
          'version',
          'admin_ok',
        ]),
        config: object(
          {
            replicated_version: int('', 0),
            applied_version: nullable(int('', 0)),
            last_apply_error: applyError(),
            domains: int('', 0),
            entries: int('', 0),
          },
          ['replicated_version', 'applied_version', 'last_apply_error', 'domains', 'entries'],
        ),
        listeners: arrayOf(
          object({ port: int(), address: str(), listening: bool(), error: nullable(str()), http3: bool() }, ['port', 'address', 'listening', 'error', 'http3']),
        ),
        upstreams: arrayOf(
          object(
            {
              entry: str('<subdomain>.<domain>:<listen_port>'),
              dial: nullable(str('Where it is dialled')),
              reachable: bool(),
              error: nullable(str()),
              latency_ms: nullable(milliseconds('Connect time')),
              checked_at: dateTime(),
              caddy: nullable(object({ address: str(), num_requests: int('', 0), fails: int('', 0) }, ['address', 'num_requests', 'fails'])),
            },
            ['entry', 'dial', 'reachable', 'error', 'latency_ms', 'checked_at', 'caddy'],
          ),
        ),
        vip: object(
          {
            configured: nullable(vipConfig()),
            claimed: bool(),
            iface: nullable(str()),
            cidrs: strArray(),
            error: nullable(str()),
          },
          ['configured', 'claimed', 'iface', 'cidrs', 'error'],
        ),
        dns: object(
          {
            listen: nullable(str()),
            running: bool(),
            error: nullable(str()),
            upstreams: strArray(),
            stats: nullable(object({ answered: int('', 0), forwarded: int('', 0), failed: int('', 0) }, ['answered', 'forwarded', 'failed'])),
          },
          ['listen', 'running', 'error', 'upstreams', 'stats'],
        ),
        recent_errors: arrayOf(caddyLogLine()),
        incidents: arrayOf(object({ incident_id: str(), kind: incidentKind(), at: dateTime(), summary: str() }, ['incident_id', 'kind', 'at', 'summary'])),
      },
      ['node_id', 'collected_at', 'lease', 'enabled', 'serving', 'caddy', 'config', 'listeners', 'upstreams', 'vip', 'dns', 'recent_errors', 'incidents'],
    ),
  incidents: () =>
    object(
      {
        incidents: arrayOf(
          object({ incident_id: str(), kind: incidentKind(), at: dateTime(), node_id: nodeId('Member it happened on'), summary: str() }, [
            'incident_id',
            'kind',
            'at',
            'node_id',
            'summary',
          ]),
        ),
      },
      ['incidents'],
    ),
  incident: () =>
    object(
      {
        incident_id: str(),
        kind: incidentKind(),
        at: dateTime(),
        node_id: nodeId('Member it happened on'),
        summary: str(),
        lease: object({ holder: nullable(str()), epoch: int('', 0), holding: bool() }, ['holder', 'epoch', 'holding']),
        config_version: int('', 0),
        config: proxyConfig(),
        caddy_config: anyValue('The Caddy configuration hostd last loaded, provider credentials redacted; null when none'),
        caddy_log: arrayOf(caddyLogLine(), "Caddy's recent log lines"),
        details: anyObject('What this kind of incident records'),
      },
      ['incident_id', 'kind', 'at', 'node_id', 'summary', 'lease', 'config_version', 'config', 'caddy_config', 'caddy_log', 'details'],
    ),
  domain: () => object({ domain: domainView(), version: version() }, ['domain', 'version']),
  domainDeleted: () =>
    object({ deleted: str('The domain'), entries_deleted: int('Entries deleted with it', 0), version: version() }, ['deleted', 'entries_deleted', 'version']),
  entry: () => object({ entry: entryView(), version: version() }, ['entry', 'version']),
  entryDeleted: () =>
    object({ deleted: str('<subdomain>.<domain>'), listen_port: int('', 1, 65535), version: version() }, ['deleted', 'listen_port', 'version']),
  renewed: () => object({ renewed: bool(), previous_serial: nullable(str()), cert: certView() }, ['renewed', 'previous_serial', 'cert']),
};

export const operations = [
  {
    name: 'proxy_config_get',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/config',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'Get the proxy configuration.',
    category: 'system',
    params: {},
    args: {},
    result: R.configView(),
  },
  {
    name: 'proxy_update',
    domain: 'proxy',
    method: 'PATCH',
    path: '/proxy',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Enable or disable.',
    category: 'system',
    params: {},
    args: {
      enabled: bool('Whether the proxy is enabled'),
    },
    required: ['enabled'],
    result: R.enabled(),
  },
  {
    name: 'proxy_move',
    domain: 'proxy',
    method: 'POST',
    path: '/proxy/move',
    scopes: ['proxy.manage'],
    hints: [],
    summary: 'Move the proxy to another cluster node.',
    category: 'system',
    params: {},
    args: {
      peer_id: str('The peer to become the proxy holder; omit to take over on this node when the recorded holder is unreachable'),
    },
    peerId: 'own',
    result: R.lease(),
  },
  {
    name: 'proxy_upstreams_list',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/upstreams',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'List targets the proxy can route to.',
    category: 'system',
    params: {},
    args: {},
    result: R.upstreams(),
  },
  {
    name: 'proxy_providers_list',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/providers',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'List DNS providers supported for public certificates.',
    category: 'system',
    params: {},
    args: {},
    result: R.providers(),
  },
  {
    name: 'proxy_host_status',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/host-status',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'Return proxy host status.',
    category: 'system',
    params: {},
    args: {},
    result: R.hostStatus(),
  },
  {
    name: 'proxy_acme_credentials_set',
    domain: 'proxy',
    method: 'PUT',
    path: '/proxy/acme/credentials',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Store DNS provider credentials.',
    category: 'system',
    params: {},
    args: {
      provider: str('DNS provider name'),
      credentials: strMap("The provider's key/value pairs"),
    },
    required: ['provider', 'credentials'],
    result: R.credentials(),
  },
  {
    name: 'proxy_acme_config_set',
    domain: 'proxy',
    method: 'PUT',
    path: '/proxy/acme/config',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Set ACME account email and directory.',
    category: 'system',
    params: {},
    args: {
      email: str('ACME account email'),
      dir_url: str('ACME directory URL; empty uses the public production directory'),
      dns_resolvers: nullable(strArray('Resolvers the DNS-01 propagation precheck queries; empty uses 1.1.1.1 and 8.8.8.8')),
    },
    required: ['email'],
    result: R.acme(),
  },
  {
    name: 'proxy_vip_set',
    domain: 'proxy',
    method: 'PUT',
    path: '/proxy/vip',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Set floating addresses.',
    category: 'system',
    params: {},
    args: {
      vip: emptyOr(ipv4('Floating IPv4 address; empty or omitted clears the floating addresses')),
      vip_iface: str('Interface the VIPs bind to; required when a vip is set'),
      vip_prefix: int('IPv4 prefix length, 1-32', 1, 32),
      vip6: emptyOr(ipv6('Optional floating IPv6 address')),
      vip6_prefix: int('IPv6 prefix length, 1-128', 1, 128),
    },
    result: R.vip(),
  },
  {
    name: 'proxy_dns_set',
    domain: 'proxy',
    method: 'PUT',
    path: '/proxy/dns',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Set the resolvers the built-in DNS responder forwards non-zone queries to.',
    category: 'system',
    params: {},
    args: {
      dns_upstreams: nullable(strArray('Resolvers to forward non-zone queries to')),
    },
    required: ['dns_upstreams'],
    result: R.dns(),
  },
  {
    name: 'proxy_http3_update',
    domain: 'proxy',
    method: 'PATCH',
    path: '/proxy/http3',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Turn HTTP/3 (QUIC) on or off alongside HTTP/1 and HTTP/2.',
    category: 'system',
    params: {},
    args: {
      enabled: bool('Whether HTTP/3 is on; false is the default'),
    },
    required: ['enabled'],
    result: R.http3(),
  },
  {
    name: 'proxy_certs_list',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/certs',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'TLS certificate status per base domain.',
    category: 'system',
    params: {},
    args: {},
    result: R.certs(),
  },
  {
    name: 'proxy_diagnostics_get',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/diagnostics',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'Collect diagnostics from the node holding the proxy.',
    category: 'system',
    params: {},
    args: {},
    result: R.diagnostics(),
  },
  {
    name: 'proxy_incidents_list',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/incidents',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'List captured incident bundles.',
    category: 'system',
    params: {},
    args: {},
    result: R.incidents(),
  },
  {
    name: 'proxy_incidents_get',
    domain: 'proxy',
    method: 'GET',
    path: '/proxy/incidents/{incident_id}',
    scopes: ['proxy.read'],
    hints: ['RO'],
    summary: 'Get one incident bundle.',
    category: 'system',
    params: { incident_id: str('Incident bundle ID') },
    args: {},
    result: R.incident(),
  },
  {
    name: 'proxy_domains_create',
    domain: 'proxy',
    method: 'POST',
    path: '/proxy/domains',
    scopes: ['proxy.manage'],
    hints: [],
    summary: 'Add a base domain.',
    category: 'system',
    params: {},
    args: {
      name: dnsName('Domain name (stored lowercase)', { minLabels: 2 }),
      cert_source: str('internal for the internal CA, or a DNS provider name for a public ACME certificate'),
    },
    required: ['name', 'cert_source'],
    result: R.domain(),
  },
  {
    name: 'proxy_domains_update',
    domain: 'proxy',
    method: 'PATCH',
    path: '/proxy/domains/{domain}',
    scopes: ['proxy.manage'],
    hints: [],
    summary: 'Rename a domain or change its certificate source.',
    category: 'system',
    params: domainParam,
    args: {
      new_name: dnsName('New domain name (stored lowercase)', { minLabels: 2 }),
      cert_source: str('internal for the internal CA, or a DNS provider name for a public ACME certificate'),
    },
    required: ['new_name', 'cert_source'],
    result: R.domain(),
  },
  {
    name: 'proxy_domains_delete',
    domain: 'proxy',
    method: 'DELETE',
    path: '/proxy/domains/{domain}',
    scopes: ['proxy.manage'],
    hints: ['DEL'],
    summary: 'Remove a base domain.',
    category: 'system',
    params: domainParam,
    args: {},
    result: R.domainDeleted(),
  },
  {
    name: 'proxy_entries_create',
    domain: 'proxy',
    method: 'POST',
    path: '/proxy/domains/{domain}/entries',
    scopes: ['proxy.manage'],
    hints: [],
    summary: 'Map a subdomain to an upstream.',
    category: 'system',
    params: domainParam,
    args: {
      subdomain: dnsLabel('Left-most label (stored lowercase)'),
      port: int('Upstream port, 1-65535', 1, 65535),
      listen_port: int('Listen port; 0 or omitted means 443; two entries may share a subdomain only on different listen ports', 0, 65535),
      ...upstreamArgs,
    },
    required: ['subdomain', 'port'],
    result: R.entry(),
  },
  {
    name: 'proxy_entries_update',
    domain: 'proxy',
    method: 'PATCH',
    path: '/proxy/domains/{domain}/entries/{subdomain}',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Update an entry.',
    category: 'system',
    params: entryParams,
    args: {
      port: int('Upstream port, 1-65535', 1, 65535),
      listen_port: int('Current listen port of the entry; 0 or omitted means 443', 0, 65535),
      new_domain: str('Move the entry to this configured domain; omitted keeps'),
      new_subdomain: dnsLabel('New subdomain; omitted keeps (stored lowercase)'),
      new_listen_port: int('New listen port; 0 or omitted keeps', 0, 65535),
      ...upstreamArgs,
    },
    required: ['port'],
    result: R.entry(),
  },
  {
    name: 'proxy_entries_delete',
    domain: 'proxy',
    method: 'DELETE',
    path: '/proxy/domains/{domain}/entries/{subdomain}',
    scopes: ['proxy.manage'],
    hints: ['DEL'],
    summary: 'Delete an entry.',
    category: 'system',
    params: entryParams,
    args: {
      listen_port: int('Listen port of the entry; 0 or omitted means 443', 0, 65535),
    },
    result: R.entryDeleted(),
  },
  {
    name: 'proxy_certs_renew',
    domain: 'proxy',
    method: 'POST',
    path: '/proxy/domains/{domain}/certs/renew',
    scopes: ['proxy.manage'],
    hints: ['IDEM'],
    summary: 'Force certificate renewal for the domain.',
    category: 'system',
    params: domainParam,
    args: {},
    result: R.renewed(),
  },
] as const satisfies readonly OperationSpec[];
