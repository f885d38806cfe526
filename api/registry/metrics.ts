import type { OperationSpec } from './types.js';
import { object, oneOf, str } from './schema.js';

/** Media types of the exposition: Prometheus text 0.0.4 by default, OpenMetrics 1.0 when `Accept` asks for it. */
export const METRICS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';
export const METRICS_OPENMETRICS = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

export const operations = [
  {
    name: 'metrics_get',
    domain: 'metrics',
    method: 'GET',
    path: '/metrics',
    scopes: ['system.read'],
    hints: ['RO'],
    summary: "This member's metrics in the Prometheus exposition format (OpenMetrics when Accept asks for it); families are listed in docs/metrics.md.",
    category: 'system',
    params: {},
    args: {
      format: oneOf(
        ['prometheus', 'openmetrics'],
        'Exposition format; over HTTP without it, OpenMetrics when the Accept header names application/openmetrics-text, else Prometheus text 0.0.4',
      ),
    },
    textResult: [METRICS_TEXT, METRICS_OPENMETRICS],
    result: object(
      {
        content_type: str('Media type of the exposition'),
        text: str('The exposition'),
      },
      ['content_type', 'text'],
    ),
  },
] as const satisfies readonly OperationSpec[];
