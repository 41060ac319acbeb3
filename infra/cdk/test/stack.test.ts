// The synthesized template: resources, table, IAM, routes, environment, outputs.

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { ALL_OPTIONS, PROJECT_DIR, allOptions, normalise, resources, statementsOf, synth } from './helpers';

const { template, rendered } = synth();

const PARTITION_REGION_ACCOUNT = '${AWS::Partition}:%s:${AWS::Region}:${AWS::AccountId}';
const arn = (service: string, rest: string) => `arn:${PARTITION_REGION_ACCOUNT.replace('%s', service)}:${rest}`;
const ALARM_FUNCTION_ARN = arn('lambda', 'function:ExecutorStack-alarm');
const SCHEDULES_ARN = arn('scheduler', 'schedule/ExecutorStack-sessions/executor-session-*');
const KEYS_CONDITION = { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SESSION#*', 'EXEC#*'] } };
const GRANTS_CONDITION = { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['GRANTS#*'] } };
const CONNECTIONS = {
  Sid: 'Connections',
  Effect: 'Allow',
  Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Query'],
  Resource: ['${Table.Arn}'],
  Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['CONNS#*'] } },
};
// Only the one generated secret: the OAuth token key.
const READ_TOKEN_KEY = {
  Sid: 'ReadTokenKey',
  Effect: 'Allow',
  Action: 'secretsmanager:GetSecretValue',
  Resource: '${TokenKey}',
};

describe('resources', () => {
  test('counts', () => {
    const counts: Record<string, number> = {
      'AWS::DynamoDB::Table': 1,
      'AWS::Scheduler::ScheduleGroup': 1,
      'AWS::Lambda::Function': 3,
      'AWS::Lambda::EventInvokeConfig': 1, // the approval function's continuations: no retries
      'AWS::Lambda::Permission': 10, // one per route
      'AWS::Lambda::LayerVersion': 0, // only with a sources file
      'AWS::IAM::Role': 4, // three functions and the scheduler
      'AWS::IAM::Policy': 4,
      'AWS::Logs::LogGroup': 4, // three functions and the API's access log
      'AWS::ApiGatewayV2::Api': 1,
      'AWS::ApiGatewayV2::Stage': 1,
      'AWS::ApiGatewayV2::Route': 10,
      'AWS::ApiGatewayV2::Integration': 2,
      'AWS::ApiGatewayV2::DomainName': 0,
      'AWS::SecretsManager::Secret': 2, // the native-mode request-state key, the OAuth token key
      'AWS::CloudWatch::Alarm': 9, // docs/deploy.md, "Alarms and dashboard"
      'AWS::CloudWatch::Dashboard': 1,
    };
    for (const [type, count] of Object.entries(counts)) template.resourceCountIs(type, count);
    const types = new Set(Object.values(rendered.Resources as Record<string, any>).map((r) => r.Type));
    const unexpected = [...types].filter((t) => !(t in counts) && t !== 'AWS::CDK::Metadata');
    assert.deepEqual(unexpected, [], 'resource types nobody reviewed');
  });

  test('the table is docs/storage.md: pk/sk strings, TTL expires_at, on demand, PITR, retained', () => {
    const table = rendered.Resources.Table;
    assert.deepEqual(table.Properties, {
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      TimeToLiveSpecification: { AttributeName: 'expires_at', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    assert.equal(table.DeletionPolicy, 'Retain');
    assert.equal(table.UpdateReplacePolicy, 'Retain');
    for (const logs of Object.values(resources(rendered, 'AWS::Logs::LogGroup'))) {
      assert.equal(logs.DeletionPolicy, 'Retain');
      assert.equal(logs.Properties.RetentionInDays, 30);
    }
  });

  test('removalPolicy destroy deletes the table and the logs with the stack', () => {
    const destroyed = synth({ removalPolicy: 'destroy' }).rendered;
    assert.equal(destroyed.Resources.Table.DeletionPolicy, 'Delete');
    for (const logs of Object.values(resources(destroyed, 'AWS::Logs::LogGroup'))) {
      assert.equal(logs.DeletionPolicy, 'Delete');
    }
  });

  test('the schedule group is named after the stack', () => {
    assert.deepEqual(rendered.Resources.SessionAlarms.Properties, { Name: 'ExecutorStack-sessions' });
    const other = synth({}, 'Staging').rendered;
    assert.equal(other.Resources.SessionAlarms.Properties.Name, 'Staging-sessions');
    assert.equal(other.Resources.AlarmFunction.Properties.FunctionName, 'Staging-alarm');
  });

  test('functions: provided.al2023, arm64, bootstrap, memory, timeouts, own log group', () => {
    const expected = {
      McpFunction: { MemorySize: 1024, Timeout: 29, logs: 'McpLogs' },
      ApprovalFunction: { MemorySize: 1024, Timeout: 360, logs: 'ApprovalLogs' },
      AlarmFunction: { MemorySize: 256, Timeout: 60, logs: 'AlarmLogs' },
    };
    for (const [name, e] of Object.entries(expected)) {
      const p = rendered.Resources[name].Properties;
      assert.equal(p.Runtime, 'provided.al2023', name);
      assert.deepEqual(p.Architectures, ['arm64'], name);
      assert.equal(p.Handler, 'bootstrap', name);
      assert.equal(p.MemorySize, e.MemorySize, name);
      assert.equal(p.Timeout, e.Timeout, name);
      assert.deepEqual(p.LoggingConfig, { LogGroup: `\${${e.logs}}` }, name);
    }
    // API Gateway cuts integrations at 30 s: the MCP function must answer first.
    assert.ok(rendered.Resources.McpFunction.Properties.Timeout < 30);
    // The approval function runs handed-on continuations to their end: at
    // least the max execution (5 min) plus a margin, invoked asynchronously
    // with no retries (the store decides what runs).
    assert.ok(rendered.Resources.ApprovalFunction.Properties.Timeout >= 300 + 30);
    const asyncConfig = Object.values(rendered.Resources as Record<string, any>).filter(
      (r) => r.Type === 'AWS::Lambda::EventInvokeConfig',
    );
    assert.equal(asyncConfig.length, 1);
    assert.equal(asyncConfig[0].Properties.MaximumRetryAttempts, 0);
    assert.equal(asyncConfig[0].Properties.FunctionName, '${ApprovalFunction}');
    assert.equal(rendered.Resources.AlarmFunction.Properties.FunctionName, 'ExecutorStack-alarm');
  });

  test('architecture x86_64', () => {
    const x86 = synth({ architecture: 'x86_64' }).rendered;
    for (const name of ['McpFunction', 'ApprovalFunction', 'AlarmFunction']) {
      assert.deepEqual(x86.Resources[name].Properties.Architectures, ['x86_64']);
    }
  });
});

describe('environment', () => {
  const timing = {
    EXECUTOR_SESSION_TIMEOUT_MS: '1800000',
    EXECUTOR_PAUSED_LEASE_MS: '600000',
    EXECUTOR_APPROVAL_WINDOW_MS: '600000',
  };
  const scheduling = {
    EXECUTOR_SCHEDULE_GROUP: 'ExecutorStack-sessions',
    EXECUTOR_ALARM_TARGET_ARN: ALARM_FUNCTION_ARN,
    EXECUTOR_SCHEDULER_ROLE_ARN: '${SchedulerRole.Arn}',
  };
  const REQUEST_STATE_KEY = {
    EXECUTOR_REQUEST_STATE_KEY: '{{resolve:secretsmanager:${RequestStateKey}:SecretString:::}}',
  };
  const TOKEN_KEY = { EXECUTOR_TOKEN_KEY_SECRET_ARN: '${TokenKey}' };
  const env = (r: Record<string, any>, name: string) => r.Resources[name].Properties.Environment.Variables;

  test('each function gets exactly what it reads', () => {
    assert.deepEqual(env(rendered, 'McpFunction'), {
      EXECUTOR_TABLE: '${Table}',
      EXECUTOR_PUBLIC_URL: '${Api.ApiEndpoint}',
      ...timing,
      ...scheduling,
      ...TOKEN_KEY,
      ...REQUEST_STATE_KEY,
      EXECUTOR_APPROVAL_FUNCTION: '${ApprovalFunction}',
      EXECUTOR_MAX_EXECUTION_MS: '300000',
    });
    // The approval function's shell reads the scheduler wiring at start-up
    // (it may not call Scheduler: see the IAM tests).
    assert.deepEqual(env(rendered, 'ApprovalFunction'), {
      EXECUTOR_TABLE: '${Table}',
      EXECUTOR_PUBLIC_URL: '${Api.ApiEndpoint}',
      ...timing,
      ...scheduling,
      ...TOKEN_KEY,
      EXECUTOR_MAX_EXECUTION_MS: '300000',
    });
    assert.deepEqual(env(rendered, 'AlarmFunction'), { EXECUTOR_TABLE: '${Table}', ...timing, ...scheduling });
  });

  test('the alarm target is the alarm function', () => {
    assert.equal(
      ALARM_FUNCTION_ARN,
      arn('lambda', `function:${rendered.Resources.AlarmFunction.Properties.FunctionName}`),
    );
  });

  test('timing knobs, OIDC and a custom domain', () => {
    const r = synth({
      sessionTimeoutMs: 60_000,
      pausedLeaseMs: 120_000,
      approvalWindowMs: 90_000,
      auditRetentionDays: 90,
      approvalWaitMs: 15_000,
      elicitationMode: 'browser',
      oidcIssuer: 'https://idp.example',
      oidcAudience: 'executor',
      oidcOwnerClaim: 'email',
      domainName: 'mcp.example.com',
      certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab',
    }).rendered;
    const knobs = {
      EXECUTOR_SESSION_TIMEOUT_MS: '60000',
      EXECUTOR_PAUSED_LEASE_MS: '120000',
      EXECUTOR_APPROVAL_WINDOW_MS: '90000',
      EXECUTOR_AUDIT_RETENTION_DAYS: '90',
    };
    const oidc = {
      EXECUTOR_OIDC_ISSUER: 'https://idp.example',
      EXECUTOR_OIDC_AUDIENCE: 'executor',
      EXECUTOR_OIDC_OWNER_CLAIM: 'email',
    };
    const web = {
      EXECUTOR_TABLE: '${Table}',
      EXECUTOR_PUBLIC_URL: 'https://mcp.example.com',
      EXECUTOR_APPROVAL_WAIT_MS: '15000',
      EXECUTOR_ELICITATION_MODE: 'browser',
      ...knobs,
      ...oidc,
    };
    const continuations = { EXECUTOR_APPROVAL_FUNCTION: '${ApprovalFunction}', EXECUTOR_MAX_EXECUTION_MS: '300000' };
    assert.deepEqual(env(r, 'McpFunction'), {
      ...web,
      ...scheduling,
      ...TOKEN_KEY,
      ...REQUEST_STATE_KEY,
      ...continuations,
    });
    assert.deepEqual(env(r, 'ApprovalFunction'), {
      ...web,
      ...scheduling,
      ...TOKEN_KEY,
      EXECUTOR_MAX_EXECUTION_MS: '300000',
    });
    assert.deepEqual(env(r, 'AlarmFunction'), { EXECUTOR_TABLE: '${Table}', ...knobs, ...scheduling });

    const domain = r.Resources.Domain.Properties;
    assert.equal(domain.DomainName, 'mcp.example.com');
    assert.deepEqual(
      domain.DomainNameConfigurations[0].CertificateArn,
      'arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab',
    );
    const mappings = Object.values(resources(r, 'AWS::ApiGatewayV2::ApiMapping'));
    assert.equal(mappings.length, 1);
    assert.equal(mappings[0].Properties.DomainName, '${Domain}');
    assert.equal(r.Outputs.McpUrl.Value, 'https://mcp.example.com/mcp');
    assert.equal(r.Outputs.ApprovalBaseUrl.Value, 'https://mcp.example.com/approvals/');
    assert.equal(r.Outputs.DomainTarget.Value, '${Domain.RegionalDomainName}');
  });
});

describe("the approver's console", () => {
  const env = (r: Record<string, any>, name: string) => r.Resources[name].Properties.Environment.Variables;
  const CONSOLE = ['EXECUTOR_CONSOLE_CLIENT_ID', 'EXECUTOR_CONSOLE_SESSION_MS'];
  const consoleVariables = (r: Record<string, any>, name: string) =>
    Object.fromEntries(Object.entries(env(r, name)).filter(([key]) => CONSOLE.includes(key)));
  const oidc = { oidcIssuer: 'https://idp.example', oidcAudience: 'executor' };

  test('no console settings unless given', () => {
    for (const fn of ['McpFunction', 'ApprovalFunction', 'AlarmFunction']) {
      assert.deepEqual(consoleVariables(rendered, fn), {});
      assert.deepEqual(consoleVariables(synth(oidc).rendered, fn), {});
    }
  });

  test('the OIDC client id and the session length reach the approval function only', () => {
    const r = synth({ ...oidc, consoleClientId: 'executor-console', consoleSessionMs: 3_600_000 }).rendered;
    assert.deepEqual(consoleVariables(r, 'ApprovalFunction'), {
      EXECUTOR_CONSOLE_CLIENT_ID: 'executor-console',
      EXECUTOR_CONSOLE_SESSION_MS: '3600000',
    });
    assert.equal(env(r, 'ApprovalFunction').EXECUTOR_OIDC_ISSUER, 'https://idp.example');
    assert.deepEqual(consoleVariables(r, 'McpFunction'), {});
    assert.deepEqual(consoleVariables(r, 'AlarmFunction'), {});
    // Each on its own.
    assert.deepEqual(consoleVariables(synth({ ...oidc, consoleClientId: 'c' }).rendered, 'ApprovalFunction'), {
      EXECUTOR_CONSOLE_CLIENT_ID: 'c',
    });
    assert.deepEqual(consoleVariables(synth({ consoleSessionMs: 60_000 }).rendered, 'ApprovalFunction'), {
      EXECUTOR_CONSOLE_SESSION_MS: '60000',
    });
  });

  test('set by the stack, so not through `environment`', () => {
    assert.throws(
      () =>
        synth({
          ...oidc,
          consoleClientId: 'executor-console',
          environment: { approval: { EXECUTOR_CONSOLE_CLIENT_ID: 'other' } },
        }),
      /environment.approval: EXECUTOR_CONSOLE_CLIENT_ID is set by the stack; use its option instead/,
    );
  });

  test('/console and everything under it go to the approval function', () => {
    const integrations = resources(rendered, 'AWS::ApiGatewayV2::Integration');
    const consoleRoutes = Object.values(resources(rendered, 'AWS::ApiGatewayV2::Route'))
      .filter((route) => route.Properties.RouteKey.includes('/console'))
      .map((route) => {
        const integrationId = route.Properties.Target.replace(/^integrations\/\$\{(.*)\}$/, '$1');
        return [route.Properties.RouteKey, integrations[integrationId].Properties.IntegrationUri];
      });
    assert.deepEqual(Object.fromEntries(consoleRoutes), {
      'ANY /console': '${ApprovalFunction.Arn}',
      'ANY /console/{proxy+}': '${ApprovalFunction.Arn}',
    });
  });
});

describe('routes', () => {
  test('each route reaches its function, payload format 2.0', () => {
    const integrations = resources(rendered, 'AWS::ApiGatewayV2::Integration');
    const routes = Object.values(resources(rendered, 'AWS::ApiGatewayV2::Route')).map((route) => {
      const integrationId = route.Properties.Target.replace(/^integrations\/\$\{(.*)\}$/, '$1');
      const integration = integrations[integrationId].Properties;
      assert.equal(integration.IntegrationType, 'AWS_PROXY');
      assert.equal(integration.PayloadFormatVersion, '2.0');
      assert.equal(route.Properties.ApiId, '${Api}');
      return [route.Properties.RouteKey, integration.IntegrationUri];
    });
    assert.deepEqual(Object.fromEntries(routes), {
      'ANY /mcp': '${McpFunction.Arn}',
      'ANY /mcp/toolkits/{name}': '${McpFunction.Arn}',
      'ANY /.well-known/{proxy+}': '${McpFunction.Arn}',
      'ANY /healthz': '${McpFunction.Arn}',
      'ANY /readyz': '${McpFunction.Arn}',
      'ANY /approvals/{proxy+}': '${ApprovalFunction.Arn}',
      'ANY /console': '${ApprovalFunction.Arn}',
      'ANY /console/{proxy+}': '${ApprovalFunction.Arn}',
      'ANY /api/{proxy+}': '${ApprovalFunction.Arn}',
      'ANY /oauth/{proxy+}': '${ApprovalFunction.Arn}',
    });
  });

  test('API Gateway may invoke the two HTTP functions, for this API only', () => {
    const permissions = Object.values(resources(rendered, 'AWS::Lambda::Permission')).map((p) => p.Properties);
    for (const p of permissions) {
      assert.equal(p.Action, 'lambda:InvokeFunction');
      assert.equal(p.Principal, 'apigateway.amazonaws.com');
      assert.match(
        p.SourceArn,
        /^arn:\$\{AWS::Partition\}:execute-api:\$\{AWS::Region\}:\$\{AWS::AccountId\}:\$\{Api\}\/\*\/\*\//,
      );
    }
    assert.deepEqual(permissions.map((p) => p.FunctionName).sort(), [
      '${ApprovalFunction.Arn}',
      '${ApprovalFunction.Arn}',
      '${ApprovalFunction.Arn}',
      '${ApprovalFunction.Arn}',
      '${ApprovalFunction.Arn}',
      '${McpFunction.Arn}',
      '${McpFunction.Arn}',
      '${McpFunction.Arn}',
      '${McpFunction.Arn}',
      '${McpFunction.Arn}',
    ]);
  });

  test('one $default stage, auto-deployed, access logs without query strings', () => {
    const stage = Object.values(resources(rendered, 'AWS::ApiGatewayV2::Stage'))[0].Properties;
    assert.equal(stage.StageName, '$default');
    assert.equal(stage.AutoDeploy, true);
    assert.equal(stage.AccessLogSettings.DestinationArn, '${ApiAccessLogs.Arn}');
    const format = JSON.parse(stage.AccessLogSettings.Format);
    assert.equal(format.path, '$context.path');
    // Approval links carry their token in the query string: never logged.
    assert.doesNotMatch(stage.AccessLogSettings.Format, /querystring|requestOverride|\$request/i);
  });

  test('outputs', () => {
    assert.deepEqual(
      Object.fromEntries(Object.entries(rendered.Outputs as Record<string, any>).map(([k, v]) => [k, v.Value])),
      {
        McpUrl: '${Api.ApiEndpoint}/mcp',
        ApprovalBaseUrl: '${Api.ApiEndpoint}/approvals/',
        TableName: '${Table}',
        ApiEndpoint: '${Api.ApiEndpoint}',
      },
    );
  });
});

describe('IAM', () => {
  const logs = (group: string) => ({
    Sid: 'WriteOwnLogs',
    Effect: 'Allow',
    Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    Resource: [`\${${group}.Arn}`],
  });
  const scheduling = [
    {
      Sid: 'ManageSessionAlarms',
      Effect: 'Allow',
      Action: ['scheduler:CreateSchedule', 'scheduler:DeleteSchedule', 'scheduler:UpdateSchedule'],
      Resource: [SCHEDULES_ARN],
    },
    {
      Sid: 'PassSchedulerRole',
      Effect: 'Allow',
      Action: ['iam:PassRole'],
      Resource: ['${SchedulerRole.Arn}'],
      Condition: { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } },
    },
  ];
  const sorted = (statements: any[]) =>
    statements.map(normalise).sort((a, b) => String(a.Sid).localeCompare(String(b.Sid)));

  test('MCP function: reads the table, writes sessions and executions, arms alarms', () => {
    assert.deepEqual(
      statementsOf(rendered, 'McpRole'),
      sorted([
        logs('McpLogs'),
        { Sid: 'ReadTable', Effect: 'Allow', Action: ['dynamodb:GetItem'], Resource: ['${Table.Arn}'] },
        {
          Sid: 'WriteSessionsAndExecutions',
          Effect: 'Allow',
          Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Query'],
          Resource: ['${Table.Arn}'],
          Condition: KEYS_CONDITION,
        },
        {
          Sid: 'CountQuotas',
          Effect: 'Allow',
          Action: ['dynamodb:UpdateItem'],
          Resource: ['${Table.Arn}'],
          Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['QUOTA#*'] } },
        },
        {
          Sid: 'Grants',
          Effect: 'Allow',
          Action: ['dynamodb:PutItem', 'dynamodb:Query'],
          Resource: ['${Table.Arn}'],
          Condition: GRANTS_CONDITION,
        },
        CONNECTIONS,
        READ_TOKEN_KEY,
        {
          Sid: 'ContinueLongRuns',
          Effect: 'Allow',
          Action: 'lambda:InvokeFunction',
          Resource: '${ApprovalFunction.Arn}',
        },
        ...scheduling,
      ]),
    );
  });

  test('approval function: reads the table, writes executions, no scheduler', () => {
    assert.deepEqual(
      statementsOf(rendered, 'ApprovalRole'),
      sorted([
        logs('ApprovalLogs'),
        { Sid: 'ReadTable', Effect: 'Allow', Action: ['dynamodb:GetItem'], Resource: ['${Table.Arn}'] },
        {
          Sid: 'WriteExecutions',
          Effect: 'Allow',
          Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem'],
          Resource: ['${Table.Arn}'],
          Condition: KEYS_CONDITION,
        },
        {
          Sid: 'Grants',
          Effect: 'Allow',
          Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Query'],
          Resource: ['${Table.Arn}'],
          Condition: GRANTS_CONDITION,
        },
        CONNECTIONS,
        {
          Sid: 'OAuthStates',
          Effect: 'Allow',
          Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
          Resource: ['${Table.Arn}'],
          Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['OAUTH#*'] } },
        },
        READ_TOKEN_KEY,
      ]),
    );
  });

  test('alarm function: sessions and executions only, manages alarms', () => {
    assert.deepEqual(
      statementsOf(rendered, 'AlarmRole'),
      sorted([
        logs('AlarmLogs'),
        {
          Sid: 'SessionsAndExecutions',
          Effect: 'Allow',
          Action: ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query'],
          Resource: ['${Table.Arn}'],
          Condition: KEYS_CONDITION,
        },
        ...scheduling,
      ]),
    );
  });

  test('scheduler role: invoke the alarm function, assumed by Scheduler for this group only', () => {
    assert.deepEqual(statementsOf(rendered, 'SchedulerRole'), [
      {
        Sid: 'InvokeAlarmFunction',
        Effect: 'Allow',
        Action: ['lambda:InvokeFunction'],
        Resource: [ALARM_FUNCTION_ARN],
      },
    ]);
    assert.deepEqual(rendered.Resources.SchedulerRole.Properties.AssumeRolePolicyDocument.Statement, [
      {
        Action: 'sts:AssumeRole',
        Effect: 'Allow',
        Principal: { Service: 'scheduler.amazonaws.com' },
        Condition: {
          StringEquals: { 'aws:SourceAccount': '${AWS::AccountId}', 'aws:SourceArn': '${SessionAlarms.Arn}' },
        },
      },
    ]);
  });

  test('function roles: assumed by Lambda, no managed policies', () => {
    for (const role of ['McpRole', 'ApprovalRole', 'AlarmRole']) {
      const p = rendered.Resources[role].Properties;
      assert.deepEqual(p.AssumeRolePolicyDocument.Statement, [
        { Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } },
      ]);
      assert.equal(p.ManagedPolicyArns, undefined, role);
      assert.equal(p.Policies, undefined, role);
    }
  });

  test('every policy belongs to one of the four roles', () => {
    const attached = Object.values(resources(rendered, 'AWS::IAM::Policy')).flatMap((p) => p.Properties.Roles);
    assert.deepEqual(attached.sort(), ['${AlarmRole}', '${ApprovalRole}', '${McpRole}', '${SchedulerRole}']);
  });

  test('no wildcard resource except the per-session schedules of the group, X-Ray and VPC interfaces', () => {
    // Scheduler has no narrower resource: schedule names are per session, made
    // at run time. Log group ARNs end in `:*` only once deployed (GetAtt).
    // X-Ray and Lambda's network-interface actions have no resource-level permissions.
    const allowed = new Set([SCHEDULES_ARN]);
    const anyResource = new Set([
      'xray:PutTraceSegments',
      'xray:PutTelemetryRecords',
      'ec2:CreateNetworkInterface',
      'ec2:DescribeNetworkInterfaces',
      'ec2:DescribeSubnets',
      'ec2:DeleteNetworkInterface',
      'ec2:AssignPrivateIpAddresses',
      'ec2:UnassignPrivateIpAddresses',
    ]);
    const check = (r: Record<string, any>) => {
      for (const policy of Object.values(resources(r, 'AWS::IAM::Policy'))) {
        for (const s of policy.Properties.PolicyDocument.Statement.map(normalise)) {
          for (const resource of s.Resource) {
            assert.ok(typeof resource === 'string', JSON.stringify(resource));
            if (resource === '*') {
              for (const action of s.Action) assert.ok(anyResource.has(action), `${action} on every resource`);
            } else if (resource.includes('*')) {
              assert.ok(allowed.has(resource), `wildcard resource ${resource}`);
            }
          }
          for (const action of s.Action) assert.ok(!action.includes('*'), `wildcard action ${action}`);
        }
      }
    };
    check(rendered);
    check(synth(allOptions()).rendered);
  });

  test('secrets: exactly the given ARNs, for the functions that call tools', () => {
    const secretArns = ALL_OPTIONS.secretArns!;
    const r = synth({ secretArns }).rendered;
    const statement = {
      Sid: 'ReadSourceSecrets',
      Effect: 'Allow',
      Action: ['secretsmanager:GetSecretValue'],
      Resource: [...secretArns].sort(),
    };
    for (const role of ['McpRole', 'ApprovalRole']) {
      assert.deepEqual(
        statementsOf(r, role).filter((s) => s.Sid === 'ReadSourceSecrets'),
        [statement],
        role,
      );
    }
    assert.deepEqual(
      statementsOf(r, 'AlarmRole').filter((s) => s.Sid === 'ReadSourceSecrets'),
      [],
    );
    assert.deepEqual(
      statementsOf(rendered, 'McpRole').filter((s) => s.Sid === 'ReadSourceSecrets'),
      [],
    );
  });
});

describe('no dependency cycle', () => {
  // CloudFormation refuses a template whose resources depend on each other in
  // a circle (e.g. a function whose environment names the API that invokes
  // it, if the API also referenced the function's configuration).
  test('the template is a DAG', () => {
    for (const t of [template.toJSON(), synth(allOptions()).template.toJSON()]) {
      const deps = new Map<string, Set<string>>();
      for (const [id, resource] of Object.entries(t.Resources as Record<string, any>)) {
        const found = new Set<string>([].concat(resource.DependsOn ?? []));
        const walk = (v: any) => {
          if (Array.isArray(v)) v.forEach(walk);
          else if (v && typeof v === 'object') {
            if (typeof v.Ref === 'string' && v.Ref in t.Resources) found.add(v.Ref);
            if (Array.isArray(v['Fn::GetAtt'])) found.add(v['Fn::GetAtt'][0]);
            Object.values(v).forEach(walk);
          }
        };
        walk(resource.Properties);
        deps.set(id, found);
      }
      const state = new Map<string, 'visiting' | 'done'>();
      const visit = (id: string, trail: string[]) => {
        if (state.get(id) === 'done') return;
        assert.notEqual(state.get(id), 'visiting', `cycle: ${[...trail, id].join(' -> ')}`);
        state.set(id, 'visiting');
        for (const dep of deps.get(id) ?? []) visit(dep, [...trail, id]);
        state.set(id, 'done');
      };
      for (const id of deps.keys()) visit(id, []);
    }
  });
});

describe('the Rust code still matches the grants', () => {
  // The IAM conditions and resources name things the Rust adapters choose; if
  // those change, the deployed functions would be refused at run time.
  const rust = (file: string) => fs.readFileSync(path.join(PROJECT_DIR, '..', '..', file), 'utf8');

  test('partition keys of sessions and executions (dynamodb:LeadingKeys)', () => {
    const records = rust('shared/store/src/records.rs');
    assert.match(records, /format!\("SESSION#\{id\}"\)/);
    assert.match(records, /format!\("EXEC#\{id\}"\)/);
    assert.match(records, /format!\("QUOTA#\{owner\}"\)/);
    assert.match(records, /format!\("GRANTS#\{owner\}"\)/);
    assert.match(records, /format!\("CONNS#\{owner\}"\)/);
    assert.match(records, /format!\("OAUTH#\{execution\}"\)/);
  });

  test('the token key variable the hosts read', () => {
    assert.match(rust('shared/catalog/src/connections.rs'), /TOKEN_KEY_ENV: &str = "EXECUTOR_TOKEN_KEY_SECRET_ARN"/);
  });

  test('schedule names (scheduler resource)', () => {
    // One schedule per alarm generation: `executor-session-<sessionId>-<at ms>`.
    assert.match(rust('shared/scheduler/src/eventbridge.rs'), /format!\("executor-session-\{session\}-\{\}"/);
  });

  test('the DynamoDB calls the adapter makes', () => {
    const calls = [
      ...rust('shared/store/src/dynamodb/mod.rs').matchAll(/\.(\w+)\(\)\s*\.(?:table_name|set_transact_items)/g),
      ...rust('shared/store/src/dynamodb/quota.rs').matchAll(/\.(\w+)\(\)\s*\.(?:table_name|set_transact_items)/g),
    ]
      .map((m) => m[1])
      .sort();
    // get_item, put_item, query, transact_*: granted. scan: local host only
    // (armed_sessions). delete_item: `executor keys revoke` only. update_item:
    // quota counters only.
    // (armed_sessions), and `executor grants revoke` finding a grant by id.
    // delete_item: `executor keys revoke`, and grant revokes (GRANTS#*).
    assert.deepEqual(
      [...new Set(calls)],
      [
        'delete_item',
        'get_item',
        'put_item',
        'query',
        'scan',
        'transact_get_items',
        'transact_write_items',
        'update_item',
      ],
    );
  });
});
