// Options for hardened and operated deployments: memory per function,
// versions and aliases, the continuations' dead-letter queue, alarms on the
// HTTP functions, a customer-managed KMS key, a permissions boundary and role
// names, and the request-state key's rotation (docs/deploy.md).

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { optionsFromContext, resolve } from '../lib/options';
import { allOptions, resources, statementsOf, synth } from './helpers';

const FUNCTIONS = ['McpFunction', 'ApprovalFunction', 'AlarmFunction'];
const ROLES = ['McpRole', 'ApprovalRole', 'AlarmRole'];
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:executor-alarms';
const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab';
const BOUNDARY = 'arn:aws:iam::123456789012:policy/executor-boundary';
const ALARM_FUNCTION_ARN = 'arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:ExecutorStack-alarm';

const defaults = synth().rendered;
const props = (r: Record<string, any>, name: string) => r.Resources[name].Properties;
const env = (r: Record<string, any>, name: string) => props(r, name).Environment.Variables;
const ofType = (r: Record<string, any>, type: string) => Object.values(resources(r, type)).map((x) => x.Properties);
const alarms = (r: Record<string, any>): Record<string, any> =>
  Object.fromEntries(ofType(r, 'AWS::CloudWatch::Alarm').map((a) => [a.AlarmName, a]));

describe('context and validation', () => {
  const from = (context: Record<string, unknown>) => optionsFromContext((key) => context[key]);

  test('-c strings and cdk.json values', () => {
    assert.deepEqual(
      from({
        memorySize: '2048',
        versions: 'true',
        aliasName: 'prod',
        continuationDeadLetterQueue: 'true',
        functionAlarms: true,
        kmsKey: 'false',
        kmsKeyArn: KEY_ARN,
        permissionsBoundaryArn: BOUNDARY,
        roleNamePrefix: 'app-',
        requestStateKeyGeneration: '3',
      }),
      {
        memorySize: { all: 2048 },
        versions: true,
        aliasName: 'prod',
        continuationDeadLetterQueue: true,
        functionAlarms: true,
        kmsKey: false,
        kmsKeyArn: KEY_ARN,
        permissionsBoundaryArn: BOUNDARY,
        roleNamePrefix: 'app-',
        requestStateKeyGeneration: 3,
      },
    );
    assert.deepEqual(from({ memorySize: '{"mcp": 3008, "alarm": 128}' }), { memorySize: { mcp: 3008, alarm: 128 } });
    assert.deepEqual(from({ memorySize: { approval: 2048 } }), { memorySize: { approval: 2048 } });
    assert.throws(() => from({ versions: 'yes' }), /context versions: expected true or false, got "yes"/);
    assert.throws(() => from({ kmsKey: '1' }), /context kmsKey: expected true or false/);
    assert.throws(
      () => from({ requestStateKeyGeneration: '0' }),
      /context requestStateKeyGeneration: expected a positive whole number/,
    );
  });

  const cases: [string, object, RegExp][] = [
    ['memory too small', { memorySize: { mcp: 64 } }, /memorySize.mcp: expected a whole number of MB from 128 to 10240, got 64/],
    ['memory too large', { memorySize: { all: 20_000 } }, /memorySize.all: expected a whole number of MB from 128 to 10240/],
    ['memory not whole', { memorySize: { alarm: 256.5 } }, /memorySize.alarm: expected a whole number of MB/],
    ['memory of an unknown function', { memorySize: { web: 512 } }, /memorySize: "web" is not all, mcp, approval or alarm/],
    ['alias without versions', { aliasName: 'prod' }, /aliasName needs versions=true/],
    ['alias of digits', { versions: true, aliasName: '42' }, /aliasName: expected up to 128 letters, digits, - and _ \(not only digits\)/],
    ['alias with a space', { versions: true, aliasName: 'my alias' }, /aliasName: expected/],
    ['function alarms without alarms', { alarms: false, functionAlarms: true }, /functionAlarms needs the alarms/],
    ['both keys', { kmsKey: true, kmsKeyArn: KEY_ARN }, /kmsKey and kmsKeyArn exclude each other/],
    ['key ARN', { kmsKeyArn: 'alias/executor' }, /kmsKeyArn: "alias\/executor" is not a KMS key ARN/],
    ['boundary ARN', { permissionsBoundaryArn: 'executor-boundary' }, /permissionsBoundaryArn: "executor-boundary" is not a managed policy ARN/],
    ['role name prefix', { roleNamePrefix: 'app/' }, /roleNamePrefix: expected up to 32 letters, digits and/],
    ['key generation', { requestStateKeyGeneration: 1.5 }, /requestStateKeyGeneration: expected a positive whole number, got 1.5/],
  ];
  for (const [name, options, message] of cases) {
    test(name, () => assert.throws(() => resolve(options), message));
  }

  test('a role name longer than IAM allows names the role', () => {
    const owner = { initialKeyOwner: 'admin' };
    assert.throws(
      () => synth({ roleNamePrefix: 'p'.repeat(32), ...owner }, 'S'.repeat(21)),
      /roleNamePrefix: the role name p{32}S{21}-initial-key is 65 characters; IAM allows 64/,
    );
    synth({ roleNamePrefix: 'p'.repeat(32), ...owner }, 'S'.repeat(20));
    // Without the initial key, the longest is the scheduler's.
    synth({ roleNamePrefix: 'p'.repeat(32) }, 'S'.repeat(22));
    assert.throws(
      () => synth({ roleNamePrefix: 'p'.repeat(32) }, 'S'.repeat(23)),
      /the role name p{32}S{23}-scheduler is 65 characters/,
    );
  });
});

describe('memorySize', () => {
  test('1024 MB for the HTTP functions and 256 MB for the alarm function unless set', () => {
    assert.deepEqual(
      FUNCTIONS.map((fn) => props(defaults, fn).MemorySize),
      [1024, 1024, 256],
    );
  });

  test('`all` for every function, a function entry for that one', () => {
    const all = synth({ memorySize: { all: 2048 } }).rendered;
    assert.deepEqual(FUNCTIONS.map((fn) => props(all, fn).MemorySize), [2048, 2048, 2048]);
    const own = synth({ memorySize: { all: 1536, alarm: 128 } }).rendered;
    assert.deepEqual(FUNCTIONS.map((fn) => props(own, fn).MemorySize), [1536, 1536, 128]);
    const one = synth({ memorySize: { mcp: 3008 } }).rendered;
    assert.deepEqual(FUNCTIONS.map((fn) => props(one, fn).MemorySize), [3008, 1024, 256]);
  });
});

describe('versions and aliases', () => {
  const r = synth({ versions: true }).rendered;
  const integrationTargets = (rendered: Record<string, any>) =>
    [...new Set(ofType(rendered, 'AWS::ApiGatewayV2::Integration').map((i) => i.IntegrationUri))].sort();
  const permissionTargets = (rendered: Record<string, any>) =>
    [...new Set(ofType(rendered, 'AWS::Lambda::Permission').map((p) => p.FunctionName))].sort();
  const continuationStatement = (rendered: Record<string, any>) =>
    statementsOf(rendered, 'McpRole').find((s) => s.Sid === 'ContinueLongRuns');

  test('off by default: $LATEST everywhere, no version, no alias', () => {
    assert.deepEqual(ofType(defaults, 'AWS::Lambda::Version'), []);
    assert.deepEqual(ofType(defaults, 'AWS::Lambda::Alias'), []);
    assert.deepEqual(integrationTargets(defaults), ['${ApprovalFunction.Arn}', '${McpFunction.Arn}']);
    assert.equal(env(defaults, 'McpFunction').EXECUTOR_APPROVAL_FUNCTION, '${ApprovalFunction}');
    for (const fn of FUNCTIONS) assert.equal(env(defaults, fn).EXECUTOR_ALARM_TARGET_ARN, ALARM_FUNCTION_ARN);
  });

  test('one published version per function and an alias `live` on it', () => {
    const versions = Object.entries(resources(r, 'AWS::Lambda::Version'));
    assert.equal(versions.length, 3);
    for (const [fn, alias] of [
      ['McpFunction', 'McpAlias'],
      ['ApprovalFunction', 'ApprovalAlias'],
      ['AlarmFunction', 'AlarmAlias'],
    ]) {
      const a = props(r, alias);
      assert.equal(a.Name, 'live');
      assert.equal(a.FunctionName, `\${${fn}}`);
      const [versionId, version] = versions.find(([, v]) => v.Properties.FunctionName === `\${${fn}}`)!;
      assert.equal(a.FunctionVersion, `\${${versionId}.Version}`);
      // Old versions stay (the alias can be pointed back); they go with the function.
      assert.equal(version.DeletionPolicy, 'Retain');
    }
    const custom = synth({ versions: true, aliasName: 'prod' }).rendered;
    assert.deepEqual(ofType(custom, 'AWS::Lambda::Alias').map((a) => a.Name), ['prod', 'prod', 'prod']);
  });

  test('the routes invoke the aliases, and API Gateway may invoke only them', () => {
    assert.deepEqual(integrationTargets(r), ['${ApprovalAlias}', '${McpAlias}']);
    assert.deepEqual(permissionTargets(r), ['${ApprovalAlias}', '${McpAlias}']);
    assert.equal(ofType(r, 'AWS::Lambda::Permission').length, 10);
  });

  test('continuations invoke the approval alias, with no retries', () => {
    // `<function name>:live`, which Lambda's Invoke takes as the function and the qualifier.
    assert.deepEqual(env(r, 'McpFunction').EXECUTOR_APPROVAL_FUNCTION, {
      'Fn::Join': ['', [{ 'Fn::Select': [6, { 'Fn::Split': [':', '${ApprovalAlias}'] }] }, ':live']],
    });
    // The function itself too: runs handed on while the alias is created.
    assert.deepEqual(continuationStatement(r), {
      Sid: 'ContinueLongRuns',
      Effect: 'Allow',
      Action: ['lambda:InvokeFunction'],
      Resource: ['${ApprovalAlias}', '${ApprovalFunction.Arn}'],
    });
    assert.deepEqual(continuationStatement(defaults)!.Resource, ['${ApprovalFunction.Arn}']);
    const configs = ofType(r, 'AWS::Lambda::EventInvokeConfig');
    assert.equal(configs.length, 2);
    for (const config of configs) {
      assert.equal(config.FunctionName, '${ApprovalFunction}');
      assert.equal(config.MaximumRetryAttempts, 0);
    }
    assert.deepEqual(
      configs.map((c) => c.Qualifier),
      ['$LATEST', { 'Fn::Select': [7, { 'Fn::Split': [':', '${ApprovalAlias}'] }] }],
    );
  });

  test('session alarms are scheduled on the alarm alias', () => {
    for (const fn of FUNCTIONS) assert.equal(env(r, fn).EXECUTOR_ALARM_TARGET_ARN, `${ALARM_FUNCTION_ARN}:live`, fn);
    assert.deepEqual(statementsOf(r, 'SchedulerRole'), [
      {
        Sid: 'InvokeAlarmFunction',
        Effect: 'Allow',
        Action: ['lambda:InvokeFunction'],
        // The function itself too: alarms armed before the alias existed.
        Resource: [ALARM_FUNCTION_ARN, `${ALARM_FUNCTION_ARN}:live`],
      },
    ]);
  });

  test('a configuration change publishes a new version; no change, the same', () => {
    const versionIds = (rendered: Record<string, any>) => Object.keys(resources(rendered, 'AWS::Lambda::Version')).sort();
    const again = synth({ versions: true }).rendered;
    assert.deepEqual(versionIds(again), versionIds(r));
    const changed = synth({ versions: true, environment: { mcp: { RUST_LOG: 'debug' } } }).rendered;
    const [before, after] = [versionIds(r), versionIds(changed)];
    const mcp = (ids: string[]) => ids.filter((id) => id.startsWith('McpFunctionCurrentVersion'));
    const alarm = (ids: string[]) => ids.filter((id) => id.startsWith('AlarmFunctionCurrentVersion'));
    assert.notDeepEqual(mcp(after), mcp(before));
    assert.deepEqual(alarm(after), alarm(before));
  });
});

describe('continuationDeadLetterQueue', () => {
  const r = synth({ continuationDeadLetterQueue: true }).rendered;
  const queue = r.Resources.ContinuationDeadLetterQueue;

  test('off by default: no queue, no dead-letter config', () => {
    assert.deepEqual(ofType(defaults, 'AWS::SQS::Queue'), []);
    for (const fn of FUNCTIONS) assert.equal(props(defaults, fn).DeadLetterConfig, undefined);
    assert.equal(defaults.Outputs.ContinuationDeadLetterQueueUrl, undefined);
  });

  test("the approval function's asynchronous invocations: kept 14 days, encrypted, TLS only", () => {
    assert.deepEqual(props(r, 'ApprovalFunction').DeadLetterConfig, { TargetArn: '${ContinuationDeadLetterQueue.Arn}' });
    assert.equal(props(r, 'McpFunction').DeadLetterConfig, undefined);
    assert.equal(props(r, 'AlarmFunction').DeadLetterConfig, undefined);
    assert.deepEqual(queue.Properties, { MessageRetentionPeriod: 1_209_600, SqsManagedSseEnabled: true });
    assert.equal(queue.DeletionPolicy, 'Retain');
    const [policy] = ofType(r, 'AWS::SQS::QueuePolicy');
    assert.deepEqual(policy.PolicyDocument.Statement[0].Condition, { Bool: { 'aws:SecureTransport': 'false' } });
    assert.equal(policy.PolicyDocument.Statement[0].Effect, 'Deny');
    assert.equal(r.Outputs.ContinuationDeadLetterQueueUrl.Value, '${ContinuationDeadLetterQueue}');
  });

  test('retries stay at 0; only the approval role may send to it', () => {
    const [config] = ofType(r, 'AWS::Lambda::EventInvokeConfig');
    assert.equal(config.MaximumRetryAttempts, 0);
    assert.deepEqual(
      statementsOf(r, 'ApprovalRole').filter((s) => s.Sid === 'KeepFailedContinuations'),
      [
        {
          Sid: 'KeepFailedContinuations',
          Effect: 'Allow',
          Action: ['sqs:SendMessage'],
          Resource: ['${ContinuationDeadLetterQueue.Arn}'],
        },
      ],
    );
    for (const role of ['McpRole', 'AlarmRole', 'SchedulerRole']) {
      assert.ok(!statementsOf(r, role).some((s) => s.Action.some((a: string) => a.startsWith('sqs:'))), role);
    }
    // Lambda checks the grant when the dead-letter queue is set.
    assert.ok(r.Resources.ApprovalFunction.DependsOn.some((d: string) => d.includes('RoleDefaultPolicy')));
  });

  test('an alarm when it holds anything', () => {
    const alarm = alarms(r)['ExecutorStack-ContinuationDeadLetters'];
    assert.equal(alarm.Namespace, 'AWS/SQS');
    assert.equal(alarm.MetricName, 'ApproximateNumberOfMessagesVisible');
    assert.deepEqual(alarm.Dimensions, [{ Name: 'QueueName', Value: '${ContinuationDeadLetterQueue.QueueName}' }]);
    assert.equal(alarm.Statistic, 'Maximum');
    assert.equal(alarm.Threshold, 0);
    assert.equal(alarms(synth({ continuationDeadLetterQueue: true, alarms: false }).rendered)['ExecutorStack-ContinuationDeadLetters'], undefined);
  });
});

describe('functionAlarms', () => {
  const r = synth({ functionAlarms: true, alarmTopicArn: TOPIC }).rendered;
  const a = alarms(r);
  const NEW = ['McpFunctionErrors', 'McpFunctionDuration', 'ApprovalFunctionErrors', 'ApprovalFunctionDuration'];

  test('off by default', () => {
    for (const name of NEW) assert.equal(alarms(defaults)[`ExecutorStack-${name}`], undefined, name);
    assert.equal(Object.keys(alarms(defaults)).length, 9);
  });

  test('Errors of the MCP and approval functions: any is too many', () => {
    for (const [name, fn] of [
      ['McpFunctionErrors', 'McpFunction'],
      ['ApprovalFunctionErrors', 'ApprovalFunction'],
    ]) {
      const alarm = a[`ExecutorStack-${name}`];
      assert.deepEqual(
        [alarm.Namespace, alarm.MetricName, alarm.Statistic, alarm.Period, alarm.Threshold, alarm.Dimensions],
        ['AWS/Lambda', 'Errors', 'Sum', 300, 0, [{ Name: 'FunctionName', Value: `\${${fn}}` }]],
      );
    }
  });

  test('Duration: the longest invocation over 90 % of the timeout (29 s, 360 s)', () => {
    for (const [name, fn, threshold] of [
      ['McpFunctionDuration', 'McpFunction', 26_100],
      ['ApprovalFunctionDuration', 'ApprovalFunction', 324_000],
    ] as const) {
      const alarm = a[`ExecutorStack-${name}`];
      assert.deepEqual(
        [alarm.Namespace, alarm.MetricName, alarm.Statistic, alarm.Threshold, alarm.Dimensions],
        ['AWS/Lambda', 'Duration', 'Maximum', threshold, [{ Name: 'FunctionName', Value: `\${${fn}}` }]],
      );
    }
  });

  test('like the others: notify the topic, say what to do, shown on the dashboard', () => {
    assert.equal(Object.keys(a).length, 13);
    const body = JSON.stringify(props(r, 'Dashboard').DashboardBody);
    for (const name of NEW) {
      const alarm = a[`ExecutorStack-${name}`];
      assert.deepEqual(alarm.AlarmActions, [TOPIC]);
      assert.deepEqual(alarm.OKActions, [TOPIC]);
      assert.equal(alarm.TreatMissingData, 'notBreaching');
      assert.equal(alarm.ComparisonOperator, 'GreaterThanThreshold');
      assert.ok(alarm.AlarmDescription.length > 60);
      assert.ok(body.includes(name), name);
    }
  });
});

describe('encryption', () => {
  const r = synth({ kmsKey: true, continuationDeadLetterQueue: true, initialKeyOwner: 'admin@example.com' }).rendered;
  const SECRETS = ['RequestStateKey', 'TokenKey', 'InitialKeySecret'];
  const useKey = (rendered: Record<string, any>, role: string) =>
    statementsOf(rendered, role).filter((s) => s.Sid === 'UseEncryptionKey');
  const statement = (resource: string, services: string[]) => ({
    Sid: 'UseEncryptionKey',
    Effect: 'Allow',
    Action: ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey'],
    Resource: [resource],
    Condition: { StringEquals: { 'kms:ViaService': services.map((s) => `${s}.\${AWS::Region}.amazonaws.com`) } },
  });

  test('off by default: the AWS-owned and AWS-managed keys, no key grant', () => {
    const d = synth({ initialKeyOwner: 'admin@example.com' }).rendered;
    assert.deepEqual(ofType(d, 'AWS::KMS::Key'), []);
    assert.equal(props(d, 'Table').SSESpecification, undefined);
    for (const secret of SECRETS) assert.equal(props(d, secret).KmsKeyId, undefined, secret);
    for (const group of ofType(d, 'AWS::Logs::LogGroup')) assert.equal(group.KmsKeyId, undefined);
    for (const role of [...ROLES, 'InitialKeyRole']) assert.deepEqual(useKey(d, role), [], role);
  });

  test('kmsKey: one key, rotated yearly, kept with the table, usable by CloudWatch Logs of this account', () => {
    assert.equal(ofType(r, 'AWS::KMS::Key').length, 1);
    const key = r.Resources.EncryptionKey;
    assert.equal(key.Properties.EnableKeyRotation, true);
    assert.equal(key.DeletionPolicy, 'Retain');
    const logs = key.Properties.KeyPolicy.Statement.find((s: any) => s.Sid === 'CloudWatchLogs');
    assert.deepEqual(logs.Principal, { Service: 'logs.${AWS::Region}.amazonaws.com' });
    assert.deepEqual(logs.Condition, {
      ArnLike: {
        'kms:EncryptionContext:aws:logs:arn': 'arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:*',
      },
    });
    assert.equal(r.Outputs.EncryptionKeyArn.Value, '${EncryptionKey.Arn}');
    assert.equal(synth({ kmsKey: true, removalPolicy: 'destroy' }).rendered.Resources.EncryptionKey.DeletionPolicy, 'Delete');
  });

  test('kmsKey: the table, the secrets, every log group and the dead-letter queue', () => {
    assert.deepEqual(props(r, 'Table').SSESpecification, {
      KMSMasterKeyId: '${EncryptionKey.Arn}',
      SSEEnabled: true,
      SSEType: 'KMS',
    });
    for (const secret of SECRETS) assert.equal(props(r, secret).KmsKeyId, '${EncryptionKey.Arn}', secret);
    const groups = ofType(r, 'AWS::Logs::LogGroup');
    assert.equal(groups.length, 5);
    for (const group of groups) assert.equal(group.KmsKeyId, '${EncryptionKey.Arn}');
    assert.equal(props(r, 'ContinuationDeadLetterQueue').KmsMasterKeyId, '${EncryptionKey.Arn}');
  });

  test('each role may use the key only through the services it calls', () => {
    assert.deepEqual(useKey(r, 'McpRole'), [statement('${EncryptionKey.Arn}', ['dynamodb', 'secretsmanager'])]);
    assert.deepEqual(useKey(r, 'ApprovalRole'), [statement('${EncryptionKey.Arn}', ['dynamodb', 'secretsmanager', 'sqs'])]);
    assert.deepEqual(useKey(r, 'AlarmRole'), [statement('${EncryptionKey.Arn}', ['dynamodb'])]);
    assert.deepEqual(useKey(r, 'InitialKeyRole'), [statement('${EncryptionKey.Arn}', ['dynamodb', 'secretsmanager'])]);
    assert.deepEqual(statementsOf(r, 'SchedulerRole').filter((s) => s.Sid === 'UseEncryptionKey'), []);
  });

  test('kmsKeyArn: an existing key for the same resources, nothing created', () => {
    const imported = synth({ kmsKeyArn: KEY_ARN }).rendered;
    assert.deepEqual(ofType(imported, 'AWS::KMS::Key'), []);
    assert.equal(props(imported, 'Table').SSESpecification.KMSMasterKeyId, KEY_ARN);
    assert.equal(props(imported, 'TokenKey').KmsKeyId, KEY_ARN);
    for (const group of ofType(imported, 'AWS::Logs::LogGroup')) assert.equal(group.KmsKeyId, KEY_ARN);
    assert.deepEqual(useKey(imported, 'McpRole'), [statement(KEY_ARN, ['dynamodb', 'secretsmanager'])]);
    assert.equal(imported.Outputs.EncryptionKeyArn, undefined);
  });
});

describe('permissionsBoundaryArn and roleNamePrefix', () => {
  test('none by default: generated names, no boundary', () => {
    for (const role of ofType(synth({ initialKeyOwner: 'admin@example.com' }).rendered, 'AWS::IAM::Role')) {
      assert.equal(role.RoleName, undefined);
      assert.equal(role.PermissionsBoundary, undefined);
    }
  });

  test('every role the stack creates gets the boundary and a name with the prefix', () => {
    const r = synth(allOptions()).rendered;
    const roles = resources(r, 'AWS::IAM::Role');
    assert.deepEqual(
      Object.fromEntries(Object.entries(roles).map(([id, role]) => [id, role.Properties.RoleName])),
      {
        SchedulerRole: 'app-ExecutorStack-scheduler',
        McpRole: 'app-ExecutorStack-mcp',
        ApprovalRole: 'app-ExecutorStack-approval',
        AlarmRole: 'app-ExecutorStack-alarm',
        InitialKeyRole: 'app-ExecutorStack-initial-key',
      },
    );
    for (const role of Object.values(roles)) assert.equal(role.Properties.PermissionsBoundary, BOUNDARY);
    const boundaryOnly = synth({ permissionsBoundaryArn: BOUNDARY }).rendered;
    for (const role of ofType(boundaryOnly, 'AWS::IAM::Role')) {
      assert.equal(role.PermissionsBoundary, BOUNDARY);
      assert.equal(role.RoleName, undefined);
    }
  });
});

describe('requestStateKeyGeneration', () => {
  const keys = (t: Record<string, any>) =>
    Object.entries(t.Resources as Record<string, any>).filter(
      ([, r]) => r.Type === 'AWS::SecretsManager::Secret' && r.Properties.Description.includes('EXECUTOR_REQUEST_STATE_KEY'),
    );
  const first = synth().template.toJSON();
  const second = synth({ requestStateKeyGeneration: 2 }).template.toJSON();

  test('generation 1 is the original secret; a new generation is a new secret, generated anew', () => {
    const [[firstId]] = keys(first);
    assert.match(firstId, /^RequestStateKey[0-9A-F]{8}$/);
    assert.deepEqual(keys(synth({ requestStateKeyGeneration: 1 }).template.toJSON()).map(([id]) => id), [firstId]);
    const found = keys(second);
    assert.equal(found.length, 1, 'the old secret is deleted');
    const [secondId, secret] = found[0];
    assert.notEqual(secondId, firstId);
    assert.deepEqual(secret.Properties.GenerateSecretString, { ExcludePunctuation: true, PasswordLength: 64 });
    assert.match(secret.Properties.Description, /generation 2$/);
  });

  test("the MCP function's configuration names the new secret, so CloudFormation updates it with the value", () => {
    const variable = (t: Record<string, any>) =>
      JSON.stringify(Object.values(t.Resources as Record<string, any>).find(
        (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Environment?.Variables?.EXECUTOR_REQUEST_STATE_KEY,
      )!.Properties.Environment.Variables.EXECUTOR_REQUEST_STATE_KEY);
    assert.ok(variable(first).includes(keys(first)[0][0]));
    assert.ok(variable(second).includes(keys(second)[0][0]));
    assert.notEqual(variable(first), variable(second));
  });

  test('with versions, a new generation publishes a new MCP version', () => {
    const mcpVersion = (t: Record<string, any>) =>
      Object.keys(t.Resources).filter((id) => id.startsWith('McpFunctionCurrentVersion'));
    const v1 = mcpVersion(synth({ versions: true }).template.toJSON());
    const v2 = mcpVersion(synth({ versions: true, requestStateKeyGeneration: 2 }).template.toJSON());
    assert.equal(v1.length, 1);
    assert.notDeepEqual(v1, v2);
  });
});
