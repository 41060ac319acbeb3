// Options for running the stack in production: per-function environment,
// layers and concurrency, tracing, VPC, throttling, log retention, alarms and
// the dashboard, and the initial API key (its custom resource and handler).

import * as assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { optionsFromContext, resolve } from '../lib/options';
import { ALL_OPTIONS, PROJECT_DIR, allOptions, resources, statementsOf, synth } from './helpers';

const FUNCTIONS = ['McpFunction', 'ApprovalFunction', 'AlarmFunction'];
const ROLES = ['McpRole', 'ApprovalRole', 'AlarmRole'];
const ADOT = 'arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1';
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:executor-alarms';

const defaults = synth().rendered;
const props = (r: Record<string, any>, name: string) => r.Resources[name].Properties;

describe('context for the production options', () => {
  const from = (context: Record<string, unknown>) => optionsFromContext((key) => context[key]);

  test('JSON objects, plain lists and numbers for every function, booleans', () => {
    assert.deepEqual(
      from({
        environment: '{"all": {"RUST_LOG": "warn"}, "mcp": {"EXECUTOR_MAX_CONCURRENT_EXECUTIONS": "4"}}',
        layerArns: `${ADOT}, ${ADOT.replace(':1', ':2')}`,
        reservedConcurrency: '10',
        tracing: 'true',
        alarms: 'false',
        vpcSubnetIds: 'subnet-0123456789abcdef0,subnet-0fedcba9876543210',
        vpcSecurityGroupIds: '["sg-0123456789abcdef0"]',
        throttleRateLimit: '50',
        throttleBurstLimit: 100,
        initialKeyOwner: 'admin',
        initialKeyGeneration: '2',
      }),
      {
        environment: { all: { RUST_LOG: 'warn' }, mcp: { EXECUTOR_MAX_CONCURRENT_EXECUTIONS: '4' } },
        layerArns: { all: [ADOT, ADOT.replace(':1', ':2')] },
        reservedConcurrency: { all: 10 },
        tracing: true,
        alarms: false,
        vpcSubnetIds: ['subnet-0123456789abcdef0', 'subnet-0fedcba9876543210'],
        vpcSecurityGroupIds: ['sg-0123456789abcdef0'],
        throttleRateLimit: 50,
        throttleBurstLimit: 100,
        initialKeyOwner: 'admin',
        initialKeyGeneration: 2,
      },
    );
    assert.deepEqual(from({ layerArns: `{"mcp": ["${ADOT}"]}`, reservedConcurrency: { mcp: 3 }, tracing: false }), {
      layerArns: { mcp: [ADOT] },
      reservedConcurrency: { mcp: 3 },
      tracing: false,
    });
  });

  test('mistakes name the context key', () => {
    assert.throws(() => from({ tracing: 'yes' }), /context tracing: expected true or false, got "yes"/);
    assert.throws(() => from({ environment: 'RUST_LOG=warn' }), /context environment: expected a JSON object/);
    assert.throws(() => from({ environment: '["RUST_LOG"]' }), /context environment: expected a JSON object/);
  });
});

describe('validation of the production options', () => {
  const cases: [string, object, RegExp][] = [
    ['unknown function', { environment: { web: { A: 'b' } } }, /environment: "web" is not all, mcp, approval or alarm/],
    ['variable name', { environment: { all: { 'A-B': 'c' } } }, /environment.all: "A-B" is not a variable name/],
    ['Lambda reserved variable', { environment: { mcp: { AWS_REGION: 'x' } } }, /AWS_REGION is set by Lambda/],
    ['variable value', { environment: { mcp: { A: 1 } } }, /environment.mcp.A: expected a string, got 1/],
    ['layer ARN', { layerArns: { all: ['my-layer'] } }, /layerArns.all: "my-layer" is not a layer version ARN/],
    ['layer ARN without version', { layerArns: { all: [ADOT.replace(/:1$/, '')] } }, /is not a layer version ARN/],
    ['concurrency', { reservedConcurrency: { alarm: 0 } }, /reservedConcurrency.alarm: expected a positive whole number/],
    ['subnets without groups', { vpcSubnetIds: ['subnet-0123456789abcdef0'] }, /go together: set both or neither/],
    [
      'subnet ID',
      { vpcSubnetIds: ['10.0.0.0/24'], vpcSecurityGroupIds: ['sg-0123456789abcdef0'] },
      /vpcSubnetIds: "10.0.0.0\/24" is not a subnet ID/,
    ],
    [
      'security group ID',
      { vpcSubnetIds: ['subnet-0123456789abcdef0'], vpcSecurityGroupIds: ['default'] },
      /vpcSecurityGroupIds: "default" is not a security group ID/,
    ],
    ['rate without burst', { throttleRateLimit: 10 }, /throttleRateLimit and throttleBurstLimit go together/],
    ['burst', { throttleRateLimit: 10, throttleBurstLimit: 2.5 }, /throttleBurstLimit: expected a positive whole number/],
    ['topic ARN', { alarmTopicArn: 'executor-alarms' }, /alarmTopicArn: "executor-alarms" is not an SNS topic ARN/],
    ['topic without alarms', { alarms: false, alarmTopicArn: TOPIC }, /alarmTopicArn needs the alarms/],
    ['owner', { initialKeyOwner: 'Alice Smith' }, /initialKeyOwner: expected up to 64 letters/],
    ['generation without owner', { initialKeyGeneration: 2 }, /initialKeyGeneration needs initialKeyOwner/],
  ];
  for (const [name, options, message] of cases) {
    test(name, () => assert.throws(() => resolve(options), message));
  }

  test('a variable the stack sets is refused, naming the function', () => {
    assert.throws(
      () => synth({ environment: { approval: { EXECUTOR_TABLE: 'other' } } }),
      /environment.approval: EXECUTOR_TABLE is set by the stack; use its option instead/,
    );
    // Not set on the alarm function, so not refused there.
    synth({ environment: { alarm: { EXECUTOR_PUBLIC_URL: 'https://x.example' } } });
  });

  test('at most five layers per function, the sources layer included', () => {
    const five = [1, 2, 3, 4, 5].map((v) => ADOT.replace(/:1$/, `:${v}`));
    synth({ layerArns: { alarm: five } });
    assert.throws(
      () => synth({ ...allOptions(), layerArns: { mcp: five } }),
      /layerArns: the mcp function would have 6 layers \(the sources layer included\); Lambda allows 5/,
    );
  });
});

describe('functions', () => {
  const r = synth(allOptions()).rendered;

  test('extra variables: `all` on every function, a function entry on that one', () => {
    for (const name of FUNCTIONS) {
      const variables = props(r, name).Environment.Variables;
      assert.equal(variables.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://localhost:4318', name);
      assert.equal(variables.AWS_LAMBDA_EXEC_WRAPPER, '/opt/otel-instrument', name);
      assert.equal(variables.EXECUTOR_MAX_CONCURRENT_EXECUTIONS, name === 'McpFunction' ? '4' : undefined, name);
      assert.equal(variables.EXECUTOR_TABLE, '${Table}', name);
    }
    const own = synth({ environment: { all: { RUST_LOG: 'warn' }, alarm: { RUST_LOG: 'debug' } } }).rendered;
    assert.equal(props(own, 'McpFunction').Environment.Variables.RUST_LOG, 'warn');
    assert.equal(props(own, 'AlarmFunction').Environment.Variables.RUST_LOG, 'debug');
  });

  test('layers: on every function, after the sources layer on the HTTP functions', () => {
    assert.deepEqual(props(r, 'McpFunction').Layers.sort(), [ADOT, '${ConfigLayer}'].sort());
    assert.deepEqual(props(r, 'ApprovalFunction').Layers.sort(), [ADOT, '${ConfigLayer}'].sort());
    assert.deepEqual(props(r, 'AlarmFunction').Layers, [ADOT]);
    const one = synth({ layerArns: { approval: [ADOT] } }).rendered;
    assert.equal(props(one, 'McpFunction').Layers, undefined);
    assert.deepEqual(props(one, 'ApprovalFunction').Layers, [ADOT]);
  });

  test('reserved concurrency: `all` unless a function has its own', () => {
    assert.equal(props(r, 'McpFunction').ReservedConcurrentExecutions, 20);
    assert.equal(props(r, 'ApprovalFunction').ReservedConcurrentExecutions, 20);
    assert.equal(props(r, 'AlarmFunction').ReservedConcurrentExecutions, 5);
    for (const name of FUNCTIONS) assert.equal(props(defaults, name).ReservedConcurrentExecutions, undefined);
  });

  test('X-Ray active tracing, with the permission to send segments', () => {
    for (const [name, role] of FUNCTIONS.map((n, i) => [n, ROLES[i]])) {
      assert.deepEqual(props(r, name).TracingConfig, { Mode: 'Active' }, name);
      const xray = statementsOf(r, role).filter((s) => s.Action.some((a: string) => a.startsWith('xray:')));
      assert.deepEqual(
        xray.map((s) => [s.Action, s.Resource]),
        [[['xray:PutTelemetryRecords', 'xray:PutTraceSegments'], ['*']]],
      );
      assert.equal(props(defaults, name).TracingConfig, undefined);
      assert.deepEqual(
        statementsOf(defaults, role).filter((s) => s.Action.some((a: string) => a.startsWith('xray:'))),
        [],
      );
    }
  });

  test('VPC: every function in the subnets and groups, with the network-interface grant', () => {
    for (const [name, role] of FUNCTIONS.map((n, i) => [n, ROLES[i]])) {
      assert.deepEqual(props(r, name).VpcConfig, {
        SubnetIds: ALL_OPTIONS.vpcSubnetIds,
        SecurityGroupIds: ALL_OPTIONS.vpcSecurityGroupIds,
      });
      assert.deepEqual(
        statementsOf(r, role).filter((s) => s.Sid === 'VpcNetworkInterfaces'),
        [
          {
            Sid: 'VpcNetworkInterfaces',
            Effect: 'Allow',
            Action: [
              'ec2:AssignPrivateIpAddresses',
              'ec2:CreateNetworkInterface',
              'ec2:DeleteNetworkInterface',
              'ec2:DescribeNetworkInterfaces',
              'ec2:DescribeSubnets',
              'ec2:UnassignPrivateIpAddresses',
            ],
            Resource: ['*'],
          },
        ],
      );
      // Lambda checks the grant when it creates the function.
      assert.ok(
        r.Resources[name].DependsOn.some((d: string) => d.includes('RoleDefaultPolicy')),
        `${name} waits for its role's policy`,
      );
      assert.equal(props(defaults, name).VpcConfig, undefined);
    }
  });

  test('log retention on every log group', () => {
    const groups = Object.values(resources(synth({ ...allOptions(), logRetentionDays: 365 }).rendered, 'AWS::Logs::LogGroup'));
    assert.equal(groups.length, 5); // three functions, the API, the initial key's function
    for (const group of groups) assert.equal(group.Properties.RetentionInDays, 365);
  });
});

describe('API', () => {
  test('stage throttling', () => {
    const stage = (r: Record<string, any>) => Object.values(resources(r, 'AWS::ApiGatewayV2::Stage'))[0].Properties;
    assert.deepEqual(stage(synth(allOptions()).rendered).DefaultRouteSettings, {
      ThrottlingRateLimit: 50,
      ThrottlingBurstLimit: 100,
    });
    assert.equal(stage(defaults).DefaultRouteSettings, undefined);
  });
});

describe('alarms and dashboard', () => {
  const alarms = (r: Record<string, any>): Record<string, any> =>
    Object.fromEntries(Object.values(resources(r, 'AWS::CloudWatch::Alarm')).map((a) => [a.Properties.AlarmName, a.Properties]));
  const a = alarms(defaults);
  const metricOf = (alarm: any) => ({ namespace: alarm.Namespace, name: alarm.MetricName, dimensions: alarm.Dimensions });

  test('one alarm per thing docs/operations.md says to watch', () => {
    assert.deepEqual(Object.keys(a).sort(), [
      'ExecutorStack-AlarmFunctionErrors',
      'ExecutorStack-AlarmThrottles',
      'ExecutorStack-ApprovalThrottles',
      'ExecutorStack-ConditionalCheckFailures',
      'ExecutorStack-ExecutionsInterrupted',
      'ExecutorStack-McpThrottles',
      'ExecutorStack-ServerErrorRate',
      'ExecutorStack-SourcesUnavailable',
      'ExecutorStack-TableThrottles',
    ]);
    for (const alarm of Object.values(a)) {
      assert.equal(alarm.TreatMissingData, 'notBreaching');
      assert.equal(alarm.ComparisonOperator, 'GreaterThanThreshold');
      assert.ok(alarm.AlarmDescription.length > 60, 'each alarm says what to do');
      assert.equal(alarm.AlarmActions, undefined);
    }
  });

  test('5xx rate: percent of the API requests, over 5 %', () => {
    const rate = a['ExecutorStack-ServerErrorRate'];
    assert.equal(rate.Threshold, 5);
    const [expression, ...metrics] = rate.Metrics;
    assert.equal(expression.Expression, 'IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)');
    assert.deepEqual(
      metrics.map((m: any) => [m.Id, m.MetricStat.Metric.Namespace, m.MetricStat.Metric.MetricName, m.MetricStat.Stat]),
      [
        ['requests', 'AWS/ApiGateway', 'Count', 'Sum'],
        ['errors', 'AWS/ApiGateway', '5xx', 'Sum'],
      ],
    );
    for (const m of metrics) assert.deepEqual(m.MetricStat.Metric.Dimensions, [{ Name: 'ApiId', Value: '${Api}' }]);
  });

  test('throttles of each function, errors of the alarm function: any is too many', () => {
    for (const [fn, name] of [
      ['McpFunction', 'McpThrottles'],
      ['ApprovalFunction', 'ApprovalThrottles'],
      ['AlarmFunction', 'AlarmThrottles'],
    ]) {
      const alarm = a[`ExecutorStack-${name}`];
      assert.deepEqual(metricOf(alarm), {
        namespace: 'AWS/Lambda',
        name: 'Throttles',
        dimensions: [{ Name: 'FunctionName', Value: `\${${fn}}` }],
      });
      assert.equal(alarm.Threshold, 0);
    }
    const errors = a['ExecutorStack-AlarmFunctionErrors'];
    assert.deepEqual(metricOf(errors), {
      namespace: 'AWS/Lambda',
      name: 'Errors',
      dimensions: [{ Name: 'FunctionName', Value: '${AlarmFunction}' }],
    });
    assert.equal(errors.Threshold, 0);
  });

  test('the table: conditional-check failures and throttled requests', () => {
    const conditional = a['ExecutorStack-ConditionalCheckFailures'];
    assert.deepEqual(metricOf(conditional), {
      namespace: 'AWS/DynamoDB',
      name: 'ConditionalCheckFailedRequests',
      dimensions: [{ Name: 'TableName', Value: '${Table}' }],
    });
    assert.equal(conditional.Threshold, 20);
    const throttles = a['ExecutorStack-TableThrottles'];
    const operations = throttles.Metrics.filter((m: any) => m.MetricStat).map(
      (m: any) => m.MetricStat.Metric.Dimensions.find((d: any) => d.Name === 'Operation').Value,
    );
    assert.deepEqual(operations.sort(), ['DeleteItem', 'GetItem', 'PutItem', 'Query', 'TransactGetItems', 'TransactWriteItems']);
    for (const m of throttles.Metrics.filter((m: any) => m.MetricStat)) {
      assert.equal(m.MetricStat.Metric.MetricName, 'ThrottledRequests');
    }
  });

  test('executions interrupted: the EMF metric of both HTTP functions', () => {
    const alarm = a['ExecutorStack-ExecutionsInterrupted'];
    assert.deepEqual(
      alarm.Metrics.filter((m: any) => m.MetricStat).map((m: any) => [
        m.MetricStat.Metric.Namespace,
        m.MetricStat.Metric.MetricName,
        m.MetricStat.Metric.Dimensions,
      ]),
      [
        ['Executor', 'ExecutionsInterrupted', [{ Name: 'Service', Value: 'mcp' }]],
        ['Executor', 'ExecutionsInterrupted', [{ Name: 'Service', Value: 'approval' }]],
      ],
    );
  });

  test('sources unavailable: the EMF level of both HTTP functions, for two periods in a row', () => {
    const alarm = a['ExecutorStack-SourcesUnavailable'];
    const [expression, ...metrics] = alarm.Metrics;
    assert.equal(expression.Expression, 'MAX([FILL(mcp, 0), FILL(approval, 0)])');
    assert.deepEqual(
      metrics.map((m: any) => [
        m.Id,
        m.MetricStat.Metric.Namespace,
        m.MetricStat.Metric.MetricName,
        m.MetricStat.Metric.Dimensions,
        m.MetricStat.Stat,
        m.MetricStat.Period,
      ]),
      [
        ['mcp', 'Executor', 'SourcesUnavailable', [{ Name: 'Service', Value: 'mcp' }], 'Maximum', 300],
        ['approval', 'Executor', 'SourcesUnavailable', [{ Name: 'Service', Value: 'approval' }], 'Maximum', 300],
      ],
    );
    assert.equal(alarm.Threshold, 0);
    assert.equal(alarm.EvaluationPeriods, 2);
    assert.match(alarm.AlarmDescription, /GET \/readyz names it/);
  });

  test('the SNS topic hears every alarm and its recovery', () => {
    for (const alarm of Object.values(alarms(synth({ alarmTopicArn: TOPIC }).rendered))) {
      assert.deepEqual(alarm.AlarmActions, [TOPIC]);
      assert.deepEqual(alarm.OKActions, [TOPIC]);
    }
  });

  test('a dashboard of the API, the functions, the executions and the table', () => {
    const dashboard = props(defaults, 'Dashboard');
    assert.equal(dashboard.DashboardName, 'ExecutorStack');
    const body = JSON.stringify(dashboard.DashboardBody);
    for (const title of [
      'API requests and errors',
      'API latency (ms)',
      'Alarms',
      'Function errors and throttles',
      'Executions',
      'Approvals and sessions',
      'Table',
    ]) {
      assert.ok(body.includes(`\\"title\\":\\"${title}`), title);
    }
    for (const alarm of Object.keys(a)) assert.ok(body.includes(alarm.replace('ExecutorStack-', '')), alarm);
  });

  test('alarms=false: no alarm, no dashboard', () => {
    const off = synth({ alarms: false }).rendered;
    assert.deepEqual(Object.keys(resources(off, 'AWS::CloudWatch::Alarm')), []);
    assert.deepEqual(Object.keys(resources(off, 'AWS::CloudWatch::Dashboard')), []);
  });
});

describe('initial key', () => {
  const r = synth({ initialKeyOwner: 'admin@example.com' }).rendered;

  test('none by default', () => {
    assert.equal(defaults.Resources.InitialKey, undefined);
    assert.equal(defaults.Outputs.InitialKeySecretArn, undefined);
  });

  test('a custom resource with the table, the secret, the owner and the generation; the secret ARN is an output', () => {
    assert.equal(r.Resources.InitialKey.Type, 'Custom::ExecutorApiKey');
    const { ServiceToken, ...properties } = props(r, 'InitialKey');
    assert.equal(ServiceToken, '${InitialKeyFunction.Arn}');
    assert.deepEqual(properties, {
      TableName: '${Table}',
      SecretArn: '${InitialKeySecret}',
      Owner: 'admin@example.com',
      Generation: '1',
    });
    assert.ok(r.Resources.InitialKey.DependsOn.some((d: string) => d.startsWith('InitialKeyRoleDefaultPolicy')));
    assert.equal(r.Outputs.InitialKeySecretArn.Value, '${InitialKeySecret}');
    // No value in the template: a random placeholder until the key is minted.
    assert.equal(props(r, 'InitialKeySecret').SecretString, undefined);
    const rotated = synth({ initialKeyOwner: 'admin@example.com', initialKeyGeneration: 2 }).rendered;
    assert.equal(props(rotated, 'InitialKey').Generation, '2');
  });

  test('its function: latest Node.js, writes only the KEYS partition and the token secret', () => {
    const fn = props(r, 'InitialKeyFunction');
    assert.equal(fn.Runtime, 'nodejs24.x');
    assert.equal(fn.Handler, 'index.handler');
    assert.deepEqual(statementsOf(r, 'InitialKeyRole'), [
      {
        Sid: 'WriteKeys',
        Effect: 'Allow',
        Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem'],
        Resource: ['${Table.Arn}'],
        Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['KEYS'] } },
      },
      {
        Sid: 'WriteOwnLogs',
        Effect: 'Allow',
        Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        Resource: ['${InitialKeyLogs.Arn}'],
      },
      {
        Sid: 'WriteToken',
        Effect: 'Allow',
        Action: ['secretsmanager:PutSecretValue'],
        Resource: ['${InitialKeySecret}'],
      },
    ]);
  });
});

describe('initial key handler', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const handler = require(path.join(PROJECT_DIR, 'functions', 'initial-key', 'index.js'));

  /** The table's KEYS partition and the secret, in memory. */
  function account(failSecret = false) {
    const keys = new Map<string, any>();
    const secrets = new Map<string, string>();
    return {
      keys,
      secrets,
      aws: {
        putKey: async (table: string, item: any) => {
          assert.equal(table, 'executor-table');
          if (keys.has(item.sk.S)) throw new Error('ConditionalCheckFailedException');
          keys.set(item.sk.S, item);
        },
        deleteKey: async (table: string, hash: string) => {
          assert.equal(table, 'executor-table');
          keys.delete(`KEY#${hash}`);
        },
        putSecret: async (arn: string, token: string) => {
          if (failSecret) throw new Error('AccessDeniedException');
          secrets.set(arn, token);
        },
      },
    };
  }
  const SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:InitialKeyToken-AbCdEf';
  const event = (type: string, extra: object = {}) => ({
    RequestType: type,
    ResourceProperties: { TableName: 'executor-table', SecretArn: SECRET, Owner: 'admin', Generation: '1' },
    ...extra,
  });

  test('the item is what the DynamoDB adapter writes for a key', () => {
    const token = `exk_${'ab'.repeat(32)}`;
    const { hash, item } = handler.keyItem(token, 'admin', 1_700_000_000_000);
    assert.equal(hash, crypto.createHash('sha256').update(token).digest('hex'));
    assert.deepEqual(
      { ...item, body: undefined },
      { pk: { S: 'KEYS' }, sk: { S: `KEY#${hash}` }, kind: { S: 'api_key' }, owner: { S: 'admin' }, body: undefined },
    );
    // serde's field order of `ApiKey` (hash, owner, created_at in milliseconds).
    assert.equal(
      Buffer.from(item.body.B).toString('utf8'),
      `{"hash":"${hash}","owner":"admin","created_at":1700000000000}`,
    );
    assert.match(handler.newToken(), /^exk_[0-9a-f]{64}$/);
    assert.notEqual(handler.newToken(), handler.newToken());
  });

  test('create stores the hash and the token; update replaces; delete revokes', async () => {
    const { keys, secrets, aws } = account();
    const first = await handler.handle(event('Create'), aws);
    const token = secrets.get(SECRET)!;
    assert.equal(first, crypto.createHash('sha256').update(token).digest('hex'));
    assert.deepEqual([...keys.keys()], [`KEY#${first}`]);
    assert.ok(![...keys.values()].some((item) => JSON.stringify(item).includes(token)), 'the token is not stored');

    const second = await handler.handle(event('Update', { PhysicalResourceId: first }), aws);
    assert.notEqual(second, first);
    assert.notEqual(secrets.get(SECRET), token);
    // CloudFormation then deletes the old physical resource.
    await handler.handle(event('Delete', { PhysicalResourceId: first }), aws);
    assert.deepEqual([...keys.keys()], [`KEY#${second}`]);
    assert.equal(secrets.get(SECRET)!.length, 68);

    await handler.handle(event('Delete', { PhysicalResourceId: second }), aws);
    assert.deepEqual([...keys.keys()], []);
  });

  test('a failed secret write takes the key back; deleting a failed create touches nothing', async () => {
    const { keys, aws } = account(true);
    await assert.rejects(handler.handle(event('Create'), aws), /AccessDeniedException/);
    assert.deepEqual([...keys.keys()], []);
    const ok = account();
    await handler.handle(event('Create'), ok.aws);
    await handler.handle(event('Delete', { PhysicalResourceId: '2026/01/01/[$LATEST]abc' }), ok.aws);
    assert.equal(ok.keys.size, 1);
  });

  test('the Rust key format still matches the handler', () => {
    const root = path.join(PROJECT_DIR, '..', '..');
    const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
    assert.match(read('cli/src/keys.rs'), /const TOKEN_PREFIX: &str = "exk_";/);
    assert.match(read('cli/src/keys.rs'), /getrandom::fill\(&mut secret\)[\s\S]*hex::encode\(secret\)/);
    const records = read('shared/store/src/records.rs');
    assert.match(records, /KEYS_PK: &str = "KEYS";/);
    assert.match(records, /KEY_PREFIX: &str = "KEY#";/);
    const item = read('shared/store/src/dynamodb/item.rs');
    for (const [name, value] of [
      ['PK', 'pk'],
      ['SK', 'sk'],
      ['KIND', 'kind'],
      ['OWNER', 'owner'],
      ['BODY', 'body'],
    ]) {
      assert.match(item, new RegExp(`const ${name}: &str = "${value}";`));
    }
    assert.match(read('shared/store/src/dynamodb/mod.rs'), /item.insert\(KIND.into\(\), s\("api_key"\)\);/);
    assert.match(
      read('shared/core/src/principal.rs'),
      // Any further field must be optional when read (`#[serde(default...)]`): the initial key has none.
      /pub struct ApiKey \{\s*pub hash: TokenHash,\s*pub owner: Principal,\s*pub created_at: Timestamp,(\s*(\/\/\/[^\n]*\s*)*#\[serde\(default[^\n]*\s*pub \w+: [^\n]+,)*\s*\}/,
    );
    assert.match(read('shared/core/src/principal.rs'), /hex::encode\(Sha256::digest\(token.as_bytes\(\)\)\)/);
  });
});
