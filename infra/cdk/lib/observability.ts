// CloudWatch alarms on what docs/operations.md ("What to alarm on") says to
// watch, an optional SNS topic they notify, and one dashboard.

import { Duration, Stack } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

import { FunctionName } from './options';

/** The functions' EMF namespace (`EXECUTOR_METRICS_NAMESPACE`'s default). */
export const METRICS_NAMESPACE = 'Executor';
/** Each alarm looks at 5-minute sums. */
const PERIOD = Duration.minutes(5);

/** The thresholds; `docs/deploy.md` explains each. */
export const THRESHOLDS = {
  /** Percent of API requests answered 5xx in a period. */
  serverErrorRatePercent: 5,
  /** Conditional-check failures per period: a few are claim races, many are a bug or a stuck client. */
  conditionalCheckFailures: 20,
  /** With `functionAlarms`: the longest invocation in a period, in percent of the function's timeout. */
  durationPercentOfTimeout: 90,
  /** Consecutive periods a source stays unavailable before its alarm fires: retries heal a short outage. */
  sourcesUnavailablePeriods: 2,
} as const;

export interface ObservabilityProps {
  api: apigw.HttpApi;
  stage: apigw.HttpStage;
  table: dynamodb.Table;
  functions: Record<FunctionName, lambda.Function>;
  /** Notified on alarm and on OK. */
  topicArn?: string;
  /** Errors and Duration of the MCP and approval functions (`functionAlarms`). */
  functionAlarms?: boolean;
  /** The continuations' dead-letter queue (`continuationDeadLetterQueue`): alarmed on when it holds anything. */
  continuationDeadLetterQueue?: sqs.IQueue;
}

export class Observability extends Construct {
  /** Alarm name suffix (after the stack name) -> alarm. */
  readonly alarms: Record<string, cloudwatch.Alarm> = {};
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);
    const stackName = Stack.of(this).stackName;
    const topic = props.topicArn ? sns.Topic.fromTopicArn(this, 'Topic', props.topicArn) : undefined;
    const { api, table, functions } = props;

    const alarm = (
      name: string,
      description: string,
      metric: cloudwatch.IMetric,
      threshold: number,
      evaluationPeriods = 1,
    ) => {
      const created = new cloudwatch.Alarm(this, name, {
        alarmName: `${stackName}-${name}`,
        alarmDescription: description,
        metric,
        threshold,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods,
        // No requests, no invocations: nothing is wrong.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      if (topic) {
        created.addAlarmAction(new actions.SnsAction(topic));
        created.addOkAction(new actions.SnsAction(topic));
      }
      this.alarms[name] = created;
    };

    const requests = api.metricCount({ period: PERIOD, statistic: 'Sum' });
    const serverErrors = api.metricServerError({ period: PERIOD, statistic: 'Sum' });
    const serverErrorRate = new cloudwatch.MathExpression({
      expression: 'IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)',
      usingMetrics: { requests, errors: serverErrors },
      period: PERIOD,
      label: '5xx %',
    });
    alarm(
      'ServerErrorRate',
      `More than ${THRESHOLDS.serverErrorRatePercent}% of requests answered 5xx in 5 minutes. A 503 means the ` +
        'table could not be reached; read the function logs: filter message = "request handled" and status >= 500.',
      serverErrorRate,
      THRESHOLDS.serverErrorRatePercent,
    );

    for (const [name, fn] of Object.entries(functions)) {
      alarm(
        `${capitalise(name)}Throttles`,
        `The ${name} function was throttled: raise its reserved concurrency (reservedConcurrency) or the account's ` +
          'concurrency quota.',
        fn.metricThrottles({ period: PERIOD, statistic: 'Sum' }),
        0,
      );
    }

    alarm(
      'AlarmFunctionErrors',
      'The alarm function failed: sessions may not end and paused executions may not expire. Read its log group ' +
        '("alarm failed") and check the Scheduler role and group.',
      functions.alarm.metricErrors({ period: PERIOD, statistic: 'Sum' }),
      0,
    );

    // With `functionAlarms`: the HTTP functions failing (an unhandled error, a
    // crash, the timeout; a 5xx the code answers is no Lambda error) or coming
    // near their timeout (the MCP function's 29 s is API Gateway's cut; the
    // approval function's also bounds the continuations).
    if (props.functionAlarms) {
      for (const name of ['mcp', 'approval'] as const) {
        const fn = functions[name];
        alarm(
          `${capitalise(name)}FunctionErrors`,
          `The ${name} function failed (an unhandled error, a crash or its timeout; answers with a 5xx status are ` +
            'not counted): read its log group around the alarm, filter level = "ERROR".',
          fn.metricErrors({ period: PERIOD, statistic: 'Sum' }),
          0,
        );
        const timeoutMs = fn.timeout!.toMilliseconds();
        const thresholdMs = Math.round((timeoutMs * THRESHOLDS.durationPercentOfTimeout) / 100);
        alarm(
          `${capitalise(name)}FunctionDuration`,
          `An invocation of the ${name} function took over ${THRESHOLDS.durationPercentOfTimeout}% of its ` +
            `${timeoutMs / 1000} s timeout: slow upstream sources or store calls, or too little memory (memorySize). ` +
            'A timeout settles the run as interrupted.',
          fn.metricDuration({ period: PERIOD, statistic: 'Maximum' }),
          thresholdMs,
        );
      }
    }

    // With `continuationDeadLetterQueue`: a continuation failed or was never run.
    if (props.continuationDeadLetterQueue) {
      alarm(
        'ContinuationDeadLetters',
        "A continuation of a long run failed or was never run and is in the approval function's dead-letter " +
          'queue (its body names the execution; the execution reads as interrupted). Read the approval log group.',
        props.continuationDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
          period: PERIOD,
          statistic: 'Maximum',
        }),
        0,
      );
    }

    alarm(
      'TableThrottles',
      'DynamoDB throttled requests to the table: check its on-demand limits (warm throughput) and the account quota.',
      table.metricThrottledRequestsForOperations({
        operations: [
          dynamodb.Operation.GET_ITEM,
          dynamodb.Operation.PUT_ITEM,
          dynamodb.Operation.DELETE_ITEM,
          dynamodb.Operation.QUERY,
          dynamodb.Operation.TRANSACT_GET_ITEMS,
          dynamodb.Operation.TRANSACT_WRITE_ITEMS,
        ],
        period: PERIOD,
      }),
      0,
    );

    alarm(
      'ConditionalCheckFailures',
      `More than ${THRESHOLDS.conditionalCheckFailures} DynamoDB conditional-check failures in 5 minutes: ` +
        'concurrent claims of the same execution or session are retrying (a client repeating requests, or ' +
        'two approvals racing). A few are normal.',
      table.metric('ConditionalCheckFailedRequests', { period: PERIOD, statistic: 'Sum' }),
      THRESHOLDS.conditionalCheckFailures,
    );

    // Settled as `interrupted` by whichever function reads it next.
    const interrupted = new cloudwatch.MathExpression({
      expression: 'FILL(mcp, 0) + FILL(approval, 0)',
      usingMetrics: {
        mcp: emf('ExecutionsInterrupted', 'mcp'),
        approval: emf('ExecutionsInterrupted', 'approval'),
      },
      period: PERIOD,
      label: 'ExecutionsInterrupted',
    });
    alarm(
      'ExecutionsInterrupted',
      'An execution stopped without an outcome (its runner crashed or timed out) and was settled as interrupted. ' +
        'Look for the execution id in the function logs.',
      interrupted,
      0,
    );

    // Sources an instance of the MCP or approval function has not connected: the
    // EMF level `SourcesUnavailable`, written on each invocation while above
    // zero (and once at zero), so the maximum over both functions.
    const sourcesUnavailable = new cloudwatch.MathExpression({
      expression: 'MAX([FILL(mcp, 0), FILL(approval, 0)])',
      usingMetrics: {
        mcp: emf('SourcesUnavailable', 'mcp', 'Maximum'),
        approval: emf('SourcesUnavailable', 'approval', 'Maximum'),
      },
      period: PERIOD,
      label: 'SourcesUnavailable',
    });
    alarm(
      'SourcesUnavailable',
      `A source of the sources file (an OpenAPI document, MCP server or GraphQL service) has not connected for ` +
        `${THRESHOLDS.sourcesUnavailablePeriods * 5} minutes: calls into it answer source_unavailable. GET /readyz ` +
        'names it with the reason and the next retry (each instance retries on use, at most every 60 s); read the ' +
        'function logs ("source unavailable") and fix the upstream, its credentials or the sources file.',
      sourcesUnavailable,
      0,
      THRESHOLDS.sourcesUnavailablePeriods,
    );

    // --- Dashboard ----------------------------------------------------------------
    const perFunction = (metric: (fn: lambda.Function) => cloudwatch.IMetric) =>
      Object.values(functions).map((fn) => metric(fn));
    const search = (metrics: string[]) =>
      new cloudwatch.MathExpression({
        expression: `SEARCH('{${METRICS_NAMESPACE},Service} MetricName=(${metrics
          .map((m) => `"${m}"`)
          .join(' OR ')})', 'Sum', 300)`,
        label: '',
        period: PERIOD,
      });
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: stackName,
      widgets: [
        [
          new cloudwatch.GraphWidget({
            title: 'API requests and errors',
            left: [
              requests,
              api.metricClientError({ period: PERIOD, statistic: 'Sum' }),
              serverErrors,
            ],
            width: 8,
          }),
          new cloudwatch.GraphWidget({
            title: 'API latency (ms)',
            left: [api.metricLatency({ statistic: 'p50' }), api.metricLatency({ statistic: 'p99' })],
            width: 8,
          }),
          new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: Object.values(this.alarms), width: 8 }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Function errors and throttles',
            left: [
              ...perFunction((fn) => fn.metricErrors({ period: PERIOD, statistic: 'Sum' })),
              ...perFunction((fn) => fn.metricThrottles({ period: PERIOD, statistic: 'Sum' })),
            ],
            width: 12,
          }),
          new cloudwatch.GraphWidget({
            title: 'Function duration p99 (ms; HTTP functions stop at 29 s)',
            left: perFunction((fn) => fn.metricDuration({ statistic: 'p99' })),
            leftAnnotations: [{ value: 29_000, label: 'HTTP timeout' }],
            width: 12,
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Executions',
            left: [
              search([
                'ExecutionsStarted',
                'ExecutionsCompleted',
                'ExecutionsFailed',
                'ExecutionsPaused',
                'ExecutionsInterrupted',
                'ExecutionsBusy',
              ]),
            ],
            width: 8,
          }),
          new cloudwatch.GraphWidget({
            title: 'Approvals and sessions',
            left: [
              search([
                'ApprovalsAccepted',
                'ApprovalsDeclined',
                'ApprovalsExpired',
                'SessionsCreated',
                'SessionsDestroyed',
                'ActivityWriteFailures',
              ]),
            ],
            width: 8,
          }),
          new cloudwatch.GraphWidget({
            title: 'Table',
            left: [
              table.metric('ConditionalCheckFailedRequests', { period: PERIOD, statistic: 'Sum' }),
              table.metricConsumedReadCapacityUnits({ period: PERIOD }),
              table.metricConsumedWriteCapacityUnits({ period: PERIOD }),
            ],
            width: 8,
          }),
        ],
      ],
    });
  }
}

/** An EMF metric the functions write (docs/operations.md, "Metrics"): counts are summed, levels maximised. */
function emf(metricName: string, service: string, statistic: 'Sum' | 'Maximum' = 'Sum'): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { Service: service },
    statistic,
    period: PERIOD,
  });
}

function capitalise(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}
