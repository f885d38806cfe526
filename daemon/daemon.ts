/**
 * The composition root: opens the store, builds services, the handler table,
 * dispatch and the transports, and closes them again in reverse order.
 */
import { MetricsService } from './metrics/service.js';
import { Cors } from '../api/http/cors.js';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import type { Logger } from 'pino';
import { socketPath, type Config } from './config.js';
import { requestLogVia, type RequestLog } from './logger.js';
import { Store } from './store/store.js';
import { TokenStore } from './auth/tokens.js';
import { ActivityLog } from './activity/log.js';
import { TaskRunner } from './tasks/runner.js';
import { EventLog } from './events/log.js';
import { EventService, type StreamArgs } from './events/service.js';
import { openAllMembers } from './events/all-members.js';
import type { Sink } from './events/subscription.js';
import { parseEventSettings } from './events/settings.js';
import { eventsPort } from './events/state.js';
import { holderEvent, memberEvent } from './events/sources.js';
import { loadIdentity } from './identity.js';
import type { ClusterPorts, NodeIdentity } from './domain.js';
import { domainList, openDomains } from './domains.js';
import { AdminApi, ADMIN_ACTOR, listenAdminSocket, registerDomainAdmin } from './admin.js';
import { FileSecretStore } from './lib/secrets.js';
import type { Caller } from './lib/caller.js';
import { operations, ALL_SCOPES } from '../api/registry/index.js';
import { Dispatch } from '../api/dispatch.js';
import { Router } from '../api/router.js';
import { openApiDocument } from '../api/catalog.js';
import { createHttpApp, createApiServer, bearerAuthenticator, requestId } from '../api/http/server.js';
import { eventsUpgrade } from '../api/http/events.js';
import { mcpListener, MCP_PATH } from '../api/mcp/server.js';
import { Cluster, type AuditEvent } from '../cluster/cluster.js';
import { registerClusterAdmin } from '../cluster/admin-routes.js';
import { LeaseManager } from '../cluster/lease.js';
import { ReplicatedConfig } from '../cluster/replicated.js';
import { proxyConfigSpec } from './proxy/config.js';
import { ConsoleSessions } from './console/sessions.js';
import { ConsoleRoutes } from './console/routes.js';
import { consoleBaseUrl, registerConsoleAdmin } from './console/admin-route.js';

export const VERSION = '0.1.0';

export interface Daemon {
  config: Config;
  identity: NodeIdentity;
  store: Store;
  tokens: TokenStore;
  activity: ActivityLog;
  tasks: TaskRunner;
  events: EventService;
  dispatch: Dispatch;
  httpServer: http.Server;
  adminServer: http.Server;
  admin: AdminApi;
  cluster: Cluster;
  /** Actual HTTP port (useful when configured with port 0). */
  httpPort: number;
  close(): Promise<void>;
}

export async function startDaemon(config: Config, log: Logger, requestLog: RequestLog = requestLogVia(log)): Promise<Daemon> {
  // The TLS listener's files are read before anything opens: a bad path stops the start at once.
  const tls = config.https ? { cert: readPem(config.https.certFile, 'https_cert_file'), key: readPem(config.https.keyFile, 'https_key_file') } : undefined;
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  let store: Store;
  try {
    store = await Store.open(path.join(config.dataDir, 'db'));
  } catch (err) {
    const msg = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new Error(`cannot open the store in ${config.dataDir}: ${msg} (is another hostd using this data dir?)`);
  }
  const identity = await loadIdentity(store, config.nodeName);
  const tokens = new TokenStore(store, ALL_SCOPES);
  await tokens.init();
  // The event log joins the activity log's and the task runner's batches: an event and its cause are stored together.
  const eventSettings = parseEventSettings(config.sections.events, process.env);
  const eventLog = new EventLog(store, identity.id, eventSettings);
  await eventLog.init();
  const events = new EventService(eventLog, eventSettings);
  tokens.onChange((c) => {
    if (c.type === 'revoke') events.closeToken(c.token.id);
  });
  // Counts requests, tasks and activity rows from the start; the metrics domain exposes it.
  const metrics = new MetricsService();
  const activity = new ActivityLog(store, config.activity, Date.now, metrics.observeActivity(eventLog));
  // A log written before the indexes existed is indexed once, here, before the daemon serves.
  await activity.init();
  const tasks = new TaskRunner(store, identity.id, eventLog);
  const interrupted = await tasks.init();
  if (interrupted) log.warn({ count: interrupted }, 'marked tasks interrupted by the last shutdown as failed');

  // The cluster listener is bound at every start (port 0 picks one); it serves
  // members only once this node is in a cluster.
  // Cluster events reach the activity log through dispatch, its one writer
  // (dispatch is built below; no event is recorded before the daemon serves).
  let dispatch: Dispatch | undefined;
  const audit = async (e: AuditEvent) => {
    // Without an actor the event is the local operator's; events caused over the cluster port name their cause.
    await dispatch?.audit({ ...e, actor: e.actor ?? ADMIN_ACTOR, metadata: e.metadata ?? { transport: 'api', via: 'admin-socket' } });
  };
  const stateEvent = (e: Parameters<EventLog['append']>[0]) => void eventLog.append(e).catch((err) => log.error({ err }, 'event write failed'));
  const cluster = await Cluster.start({
    config,
    identity,
    store,
    tokens,
    audit,
    log,
    probeIntervalMs: config.clusterProbeMs,
    onReachability: (m, up) => stateEvent(memberEvent(m, up)),
  });
  const link = cluster.leaseLink();
  const lease = new LeaseManager(store, link, log.child({ mod: 'lease' }));
  await lease.init();
  const proxyConfig = new ReplicatedConfig(store, link, log.child({ mod: 'proxy-config' }), proxyConfigSpec);
  await proxyConfig.init();
  cluster.setLeaseHooks({
    handleLease: (msg) => lease.handle(msg),
    handleProxyConfig: (msg) => proxyConfig.handle(msg),
    onInit: async () => {
      await lease.initialize(identity.id);
    },
    exportLease: () => {
      const { holder, epoch } = lease.state();
      return { holder, epoch };
    },
    adoptLease: async (rec) => {
      await lease.adopt(rec);
    },
    afterJoin: async () => {
      await Promise.allSettled([lease.sync(), proxyConfig.sync()]);
    },
  });
  // One proxy.holder event per move this member learns of (the lease fires on every record change).
  let lastHolder = `${lease.state().holder}@${lease.state().epoch}`;
  lease.onChange((st) => {
    const now = `${st.holder}@${st.epoch}`;
    if (now === lastHolder) return;
    lastHolder = now;
    stateEvent(holderEvent(st.holder, st.epoch));
  });
  lease.start();
  proxyConfig.start();

  const clusterPorts: ClusterPorts = {
    lease,
    proxyConfig,
    members: () => cluster.memberIds(),
    peers: () => cluster.peers(),
    sharedSecret: (purpose) => cluster.sharedSecret(purpose),
  };
  const secrets = new FileSecretStore(config.dataDir);
  const domains = await openDomains(
    domainList({ tasks, activity, events, metrics, version: VERSION, tokens }),
    { node: identity, config, env: process.env, store, tasks: metrics.observeTasks(tasks), secrets, log, cluster: clusterPorts, events: eventsPort(eventLog) },
    config.sections,
  );
  // The API's and MCP's calls are counted; the admin socket's are the operator's, logged but not counted.
  const apiRequestLog = metrics.observeRequests(requestLog);
  const handlers = domains.handlers;
  // Forwarded calls are counted by peer (hostd_forwarded_calls_total); the event stream's peer lookup is not a call.
  dispatch = new Dispatch({ handlers, activity, forwarder: metrics.observeForwarder(cluster.forwarder), log });
  cluster.setDispatch(dispatch);
  cluster.setEvents(events);
  const router = new Router(operations);
  let openapi: unknown;
  const openApi = () => (openapi ??= openApiDocument(VERSION));

  const bearer = (transport: 'api' | 'mcp') =>
    bearerAuthenticator(
      (s) => tokens.authenticate(s),
      () => identity.id,
      transport,
    );
  const streams = {
    events,
    resolvePeer: (peerId: string) => {
      const where = cluster.forwarder.resolve(peerId);
      return where === undefined ? undefined : where === 'self' ? ('self' as const) : ('other' as const);
    },
    forwardStream: cluster.streamForwarder(),
    // members=all: every member's stream through the same forwarded path (the caller's scopes apply on each member).
    allMembers: (caller: Caller, args: StreamArgs, lastEventId: string | undefined, requestId: string, sink: Sink) =>
      openAllMembers(
        { events, members: () => cluster.memberIds(), forward: cluster.streamForwarder(), log: log.child({ mod: 'events' }) },
        caller,
        args,
        lastEventId,
        requestId,
        sink,
      ),
  };
  // Console sessions live in memory: a restart signs every browser out (docs/console.md).
  const consoleSessions = new ConsoleSessions();
  const consoleRoutes = new ConsoleRoutes({
    sessions: consoleSessions,
    nodeId: () => identity.id,
    scopes: [...ALL_SCOPES],
    log: log.child({ mod: 'console' }),
    audit: (summary, severity) =>
      dispatch!.audit({
        category: 'auth',
        severity,
        summary,
        target: 'console/session',
        actor: ADMIN_ACTOR,
        metadata: { transport: 'api', client: 'console' },
      }),
  });
  const app = createHttpApp({
    dispatch,
    router,
    log,
    requestLog: apiRequestLog,
    openapi: openApi,
    cors: new Cors(config.corsOrigins),
    events: streams,
    authenticate: bearer('api'),
    session: (req) => consoleRoutes.sessionCaller(req),
    mount: (a) => consoleRoutes.mount(a),
    direct: { [MCP_PATH]: mcpListener({ dispatch, log, requestLog: apiRequestLog, version: VERSION, authenticate: bearer('mcp') }) },
  });
  const httpServer = createApiServer(app, config.httpLimits);
  httpServer.on('upgrade', eventsUpgrade({ ...streams, authenticate: bearer('api'), log, requestLog: apiRequestLog }, requestId));
  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(config.http.port, config.http.host, () => resolve());
  });
  const httpPort = (httpServer.address() as { port: number }).port;
  let httpsServer: http.Server | undefined;
  if (config.https) {
    const server = createApiServer(app, config.httpLimits, tls!);
    httpsServer = server;
    server.on('upgrade', eventsUpgrade({ ...streams, authenticate: bearer('api'), log, requestLog: apiRequestLog }, requestId));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.https!.port, config.https!.host, () => resolve());
    });
  }
  const httpsPort = httpsServer ? (httpsServer.address() as { port: number }).port : undefined;

  const admin = new AdminApi({ tokens, audit: (e) => dispatch!.audit(e), requestLog });
  registerClusterAdmin(admin, cluster);
  registerDomainAdmin(admin, domains.admin);
  registerConsoleAdmin(admin, consoleSessions, () => config.consoleUrl ?? consoleBaseUrl(config.http.host, httpPort));
  const adminCaller: Caller = { tokenId: 'admin', tokenName: ADMIN_ACTOR, scopes: [...ALL_SCOPES], transport: 'api', origin: identity.id };
  const adminApp = createHttpApp({
    dispatch,
    router,
    log,
    requestLog,
    openapi: openApi,
    authenticate: () => ({ ...adminCaller }),
    mount: (a) => admin.mount(a),
    events: streams,
  });
  const adminServer = await listenAdminSocket(adminApp, socketPath(config.dataDir));
  adminServer.on('upgrade', eventsUpgrade({ ...streams, authenticate: () => ({ ...adminCaller }), log, requestLog }, requestId));

  log.info(
    {
      http: `http://${config.http.host}:${httpPort}`,
      ...(httpsPort !== undefined ? { https: consoleBaseUrl(config.https!.host, httpsPort, true) } : {}),
      socket: socketPath(config.dataDir),
      cluster: cluster.listenAddress,
      cluster_advertise: cluster.advertise,
      in_cluster: cluster.inCluster,
      node_id: identity.id,
      pools: config.pools.map((p) => p.id),
    },
    'hostd listening',
  );
  log.flush();

  let closed = false;
  return {
    config,
    identity,
    store,
    tokens,
    activity,
    tasks,
    events,
    dispatch,
    httpServer,
    adminServer,
    admin,
    httpPort,
    cluster,
    async close() {
      if (closed) return;
      closed = true;
      // Open streams end first: a server waits for its connections to close.
      events.close();
      await Promise.all(
        [httpServer, adminServer, ...(httpsServer ? [httpsServer] : [])].map(
          (s) =>
            new Promise<void>((r) => {
              s.close(() => r());
              s.closeAllConnections?.();
            }),
        ),
      );
      lease.stop();
      proxyConfig.stop();
      await cluster.close();
      await tasks.shutdown();
      await domains.close();
      await tokens.close();
      await store.close();
      try {
        fs.unlinkSync(socketPath(config.dataDir));
      } catch {
        /* already gone */
      }
    },
  };
}

/** A PEM file of the TLS listener, read at start; a problem stops the start naming the setting. */
function readPem(file: string, key: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new Error(`${key}: cannot read ${file}: ${(err as Error).message}`);
  }
}
