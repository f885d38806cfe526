/**
 * The layering of ARCHITECTURE.md as import rules (test/unit/layering.test.ts
 * runs them on every `npm test`). From the ground up:
 *   daemon/lib                      imports nothing of ours
 *   api/registry                    the operations, declared once (lib only)
 *   daemon/store, certs, config     storage and configuration
 *   daemon/domain.ts                the domain contract (types, ports)
 *   daemon/<domain>/                the domains; their <runtime>/ drivers know no service
 *   api/dispatch, router, ...       transport-neutral request handling
 *   api/http, api/mcp, daemon/admin, cluster/   transports and the mesh
 *   daemon/daemon.ts, main.ts, domains.ts, cli/ the composition root and hostctl
 */
const DOMAINS = '(folders|system|tasks|activity|peers|proxy|vms|sandboxes|lxc|apps|locations)';
const ROOT = '^daemon/(daemon|main|domains)[.]ts$';

/**
 * The driver boundary (ARCHITECTURE.md, "The domain pattern"): a domain's
 * service side (every file of daemon/<domain>/ outside its runtime folders,
 * except index.ts, which composes the service with its driver) reaches its
 * runtime only through driver.ts, whose types the domain owns. A subfolder of
 * a domain is a runtime folder unless it is listed here as part of the
 * domain's own rules (pure modules that run no host program).
 */
const DOMAIN_LEVEL_FOLDERS = ['apps/compose', 'apps/catalog', 'proxy/policy'];
const NOT_RUNTIME = `^daemon/(${DOMAIN_LEVEL_FOLDERS.join('|')})/`;
const RUNTIME_FILE = `^daemon/${DOMAINS}/[^/]+/`;

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'imports form no cycle', from: {}, to: { circular: true } },
    {
      name: 'lib-imports-nothing-of-ours',
      severity: 'error',
      from: { path: '^daemon/lib/' },
      to: { path: '^(api|daemon|cluster|certs)/', pathNot: '^daemon/lib/' },
    },
    {
      name: 'registry-is-data',
      severity: 'error',
      from: { path: '^api/registry/' },
      to: { path: '^(api|daemon|cluster|certs)/', pathNot: '^(api/registry|daemon/lib)/' },
    },
    {
      name: 'storage-and-config-stay-low',
      severity: 'error',
      from: { path: '^(daemon/store/|certs/|daemon/(config|logger|identity)[.]ts$)' },
      to: { path: `^(api/(?!registry/)|cluster/|daemon/${DOMAINS}/|daemon/(admin|daemon|main|domains)[.]ts$|daemon/cli/)` },
    },
    {
      name: 'contract-stays-low',
      severity: 'error',
      from: { path: '^daemon/domain[.]ts$' },
      to: { path: `^(api/(?!registry/)|cluster/|daemon/${DOMAINS}/|daemon/(admin|daemon|main|domains)[.]ts$|daemon/cli/)` },
    },
    {
      name: 'domains-know-no-transport',
      severity: 'error',
      comment: 'a domain knows nothing of HTTP, MCP, gRPC, dispatch or the composition root (the registry is data, allowed)',
      from: { path: `^daemon/${DOMAINS}/` },
      to: { path: `^(api/(?!registry/)|cluster/|daemon/(admin|daemon|main|domains)[.]ts$|daemon/cli/|daemon/auth/)` },
    },
    {
      name: 'domains-meet-through-ports',
      severity: 'error',
      comment: 'domains reach each other through ports (daemon/domain.ts); only sandboxes build on vms',
      from: { path: `^daemon/${DOMAINS}/`, pathNot: '^daemon/sandboxes/' },
      to: { path: `^daemon/${DOMAINS}/`, pathNot: '^daemon/$1/' },
    },
    {
      name: 'sandboxes-build-only-on-vms',
      severity: 'error',
      from: { path: '^daemon/sandboxes/' },
      to: { path: `^daemon/${DOMAINS}/`, pathNot: '^daemon/(sandboxes|vms)/' },
    },
    {
      name: 'drivers-know-no-service',
      severity: 'error',
      comment: 'a runtime driver (daemon/<domain>/<runtime>/) knows nothing of services, records, tokens or the activity log',
      from: { path: `^daemon/${DOMAINS}/[^/]+/` },
      to: { path: '^daemon/(auth/|activity/|$1/(service|handlers|index|records)[.]ts$)' },
    },
    {
      name: 'services-reach-runtime-through-driver',
      severity: 'error',
      comment: 'a service file imports its runtime folder: go through driver.ts (types owned by the domain)',
      from: { path: `^daemon/${DOMAINS}/`, pathNot: [`^daemon/${DOMAINS}/index[.]ts$`, `(?!${NOT_RUNTIME})${RUNTIME_FILE}`] },
      to: { path: '^daemon/$1/[^/]+/', pathNot: NOT_RUNTIME },
    },
    {
      name: 'api-core-knows-no-transport',
      severity: 'error',
      from: { path: '^api/[^/]+[.]ts$' },
      to: { path: '^(api/(http|mcp)/|daemon/admin[.]ts$|cluster/)' },
    },
    {
      name: 'api-and-cluster-one-way',
      severity: 'error',
      comment: 'the cluster implements the Forwarder port of api/dispatch; api never imports cluster',
      from: { path: '^api/' },
      to: { path: '^cluster/' },
    },
    {
      name: 'mesh-imports-no-domain-service',
      severity: 'error',
      from: { path: '^cluster/' },
      to: { path: `^(daemon/${DOMAINS}/|daemon/(auth|activity)/|api/(http|mcp)/)` },
    },
    {
      name: 'activity-log-has-one-writer',
      severity: 'error',
      comment: 'rows are written by dispatch alone; the activity domain reads them',
      from: { pathNot: `^(api/dispatch[.]ts|daemon/activity/|${ROOT.slice(1, -1)})` },
      to: { path: '^daemon/activity/log[.]ts$' },
    },
    {
      name: 'nothing-imports-the-root',
      severity: 'error',
      from: { pathNot: '^daemon/(daemon|main)[.]ts$' },
      to: { path: ROOT },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist|test)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
