// Executor on Lambda: three functions behind an HTTP API, one DynamoDB table,
// one EventBridge Scheduler group for session alarms (docs/architecture.md, docs/deploy.md).

import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  ArnFormat,
  AssetHashType,
  CfnOutput,
  DockerImage,
  Duration,
  RemovalPolicy,
  Stack,
  StackProps,
  Validations,
} from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as acm from 'aws-cdk-lib/aws-certificatemanager';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

import { ApprovalEmail } from './approval-email';
import { useKey } from './encryption';
import { InitialKey } from './initial-key';
import { Observability } from './observability';
import {
  ExecutorOptions,
  FUNCTIONS,
  FunctionName,
  MAX_LAYERS,
  MAX_ROLE_NAME,
  ROLE_SUFFIXES,
  Resolved,
  resolve,
} from './options';
import { isGranted, readSources } from './sources';

/** The Rust binaries (`[[bin]]` names), each shipped as `bootstrap`. */
export const BINARIES = {
  mcp: 'mcp-function',
  approval: 'approval-function',
  alarm: 'alarm-function',
} as const;

/** API Gateway cuts HTTP integrations at 30 s; the functions answer before that. */
export const HTTP_FUNCTION_TIMEOUT = Duration.seconds(29);

/** The longest a run may take (`EXECUTOR_MAX_EXECUTION_MS`, the service's default). */
export const MAX_EXECUTION = Duration.minutes(5);

/**
 * The approval function also runs the continuations the MCP function hands on
 * (asynchronous invocations, no API Gateway limit): a whole run plus time to
 * replay its journal and store the outcome. Its HTTP answers stay below 30 s
 * (the approval wait and the response budget bound them).
 */
export const CONTINUATION_TIMEOUT = Duration.seconds(MAX_EXECUTION.toSeconds() + 60);

export interface ExecutorStackProps extends StackProps, ExecutorOptions {}

export class ExecutorStack extends Stack {
  readonly options: Resolved;
  readonly table: dynamodb.Table;
  readonly scheduleGroup: scheduler.CfnScheduleGroup;
  readonly schedulerRole: iam.Role;
  readonly mcpFunction: lambda.Function;
  readonly approvalFunction: lambda.Function;
  readonly alarmFunction: lambda.Function;
  /** With `versions`: each function's alias, which the routes, continuations and alarms invoke. */
  readonly aliases: Partial<Record<FunctionName, lambda.Alias>> = {};
  /** With `continuationDeadLetterQueue`: the approval function's failed asynchronous invocations. */
  readonly continuationDeadLetterQueue?: sqs.Queue;
  /** With `kmsKey` (created) or `kmsKeyArn` (imported): encrypts the table, secrets, logs and queue. */
  readonly encryptionKey?: kms.IKey;
  readonly configLayer?: lambda.LayerVersion;
  readonly requestStateKey: secretsmanager.Secret;
  readonly tokenKey: secretsmanager.Secret;
  readonly api: apigw.HttpApi;
  readonly observability?: Observability;
  readonly initialKey?: InitialKey;
  /** Lifecycle events (docs/events.md), with `eventBus` or `approvalEmail`. */
  readonly eventBus?: events.EventBus;
  readonly approvalEmail?: ApprovalEmail;
  /** Where clients connect: the custom domain when set, else the API's own endpoint. No trailing slash. */
  readonly publicUrl: string;

  constructor(scope: Construct, id: string, props: ExecutorStackProps = {}) {
    super(scope, id, props);
    const o = (this.options = resolve(props));
    const removal = o.removalPolicy === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN;
    const architecture = o.architecture === 'arm64' ? lambda.Architecture.ARM_64 : lambda.Architecture.X86_64;

    // Names derived from the stack name, so that two stacks (prod, staging) can
    // live in one account. The alarm function needs a known name: it schedules
    // its own next alarm, and its ARN in its own environment would otherwise be
    // a self-reference CloudFormation cannot resolve.
    const alarmFunctionName = `${this.stackName}-alarm`;
    const groupName = `${this.stackName}-sessions`;
    if (alarmFunctionName.length > 64) {
      throw new Error(`stack name ${this.stackName} is too long: Lambda function names are at most 64 characters`);
    }
    // With `roleNamePrefix`, every role is named `<prefix><stack>-<role>`.
    if (o.roleNamePrefix !== undefined) {
      for (const suffix of ROLE_SUFFIXES.filter((r) => r !== 'initial-key' || o.initialKey)) {
        const name = this.roleName(suffix)!;
        if (name.length > MAX_ROLE_NAME) {
          throw new Error(
            `roleNamePrefix: the role name ${name} is ${name.length} characters; IAM allows ${MAX_ROLE_NAME}. ` +
              'Use a shorter prefix or stack name',
          );
        }
      }
    }
    // With `permissionsBoundaryArn`, on every role of the stack (an aspect: roles made by constructs too).
    if (o.permissionsBoundaryArn) {
      iam.PermissionsBoundary.of(this).apply(
        iam.ManagedPolicy.fromManagedPolicyArn(this, 'PermissionsBoundary', o.permissionsBoundaryArn),
      );
    }

    // --- Encryption at rest: docs/deploy.md, "Encryption" ----------------------
    // Without an option, AWS-owned (table) and AWS-managed (secrets) keys, and
    // CloudWatch Logs' own encryption, as before.
    if (o.encryption && 'create' in o.encryption) {
      const key = new kms.Key(this, 'EncryptionKey', {
        description: `Executor (${this.stackName}): the table, secrets, log groups and dead-letter queue`,
        enableKeyRotation: true,
        removalPolicy: removal,
      });
      // CloudWatch Logs encrypts with the key itself (not through the callers'
      // roles): only for log groups of this account and region. The stack's
      // log groups cannot be named here (they refer to the key: a cycle).
      const logGroups = `arn:${this.partition}:logs:${this.region}:${this.account}:log-group:*`;
      key.addToResourcePolicy(
        new iam.PolicyStatement({
          sid: 'CloudWatchLogs',
          principals: [new iam.ServicePrincipal(`logs.${this.region}.amazonaws.com`)],
          actions: ['kms:Encrypt*', 'kms:Decrypt*', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:Describe*'],
          resources: ['*'],
          conditions: { ArnLike: { 'kms:EncryptionContext:aws:logs:arn': logGroups } },
        }),
      );
      this.encryptionKey = key;
    } else if (o.encryption && 'keyArn' in o.encryption) {
      this.encryptionKey = kms.Key.fromKeyArn(this, 'EncryptionKey', o.encryption.keyArn);
    }
    const key = this.encryptionKey;

    // --- Storage: docs/storage.md ---------------------------------------------
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'expires_at',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: key ? dynamodb.TableEncryption.CUSTOMER_MANAGED : undefined,
      encryptionKey: key,
      removalPolicy: removal,
    });

    // --- Session alarms: docs/lifecycle.md -------------------------------------
    // Deleting the group (stack teardown) deletes the schedules left in it.
    this.scheduleGroup = new scheduler.CfnScheduleGroup(this, 'SessionAlarms', { name: groupName });
    // The scheduler adapter names each alarm's schedule `executor-session-<sessionId>-<generation>`.
    const schedulesArn = this.formatArn({
      service: 'scheduler',
      resource: 'schedule',
      resourceName: `${groupName}/executor-session-*`,
      arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
    });
    const alarmFunctionArn = this.formatArn({
      service: 'lambda',
      resource: 'function',
      resourceName: alarmFunctionName,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    // With `versions`, alarms are scheduled on the alarm function's alias:
    // also a known ARN, for the same reason.
    const alarmTargetArn = o.versions ? `${alarmFunctionArn}:${o.versions.aliasName}` : alarmFunctionArn;

    // The role Scheduler assumes to deliver an alarm: invoke the alarm function
    // and nothing else, and only for schedules of this group (confused deputy).
    this.schedulerRole = new iam.Role(this, 'SchedulerRole', {
      roleName: this.roleName('scheduler'),
      description: 'EventBridge Scheduler delivers session alarms to the alarm function',
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: {
          StringEquals: { 'aws:SourceAccount': this.account, 'aws:SourceArn': this.scheduleGroup.attrArn },
        },
      }),
    });
    this.schedulerRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'InvokeAlarmFunction',
        actions: ['lambda:InvokeFunction'],
        // With `versions`, the alias, and the function itself for the alarms
        // armed before the alias existed (both run the same build).
        resources: o.versions ? [alarmFunctionArn, alarmTargetArn] : [alarmFunctionArn],
      }),
    );

    // --- Lifecycle events: docs/events.md ----------------------------------------
    // Every function emits (pauses and outcomes, decisions, destroyed sessions)
    // and delivers what others left in the outbox.
    const eventing: Record<string, string> = {};
    if (o.events?.bus) {
      this.eventBus = new events.EventBus(this, 'Events', {
        description: 'Executor: lifecycle events (Execution Paused, ...); whoever reads it can approve',
      });
      eventing.EXECUTOR_EVENT_BUS = this.eventBus.eventBusName;
    }
    if (o.events?.webhook) eventing.EXECUTOR_EVENT_WEBHOOK = o.events.webhook;

    // --- Functions -------------------------------------------------------------
    const common = {
      EXECUTOR_TABLE: this.table.tableName,
      EXECUTOR_SESSION_TIMEOUT_MS: String(o.sessionTimeoutMs),
      EXECUTOR_PAUSED_LEASE_MS: String(o.pausedLeaseMs),
      EXECUTOR_APPROVAL_WINDOW_MS: String(o.approvalWindowMs),
      ...(o.auditRetentionDays ? { EXECUTOR_AUDIT_RETENTION_DAYS: String(o.auditRetentionDays) } : {}),
      ...eventing,
    };
    const scheduling = {
      EXECUTOR_SCHEDULE_GROUP: groupName,
      EXECUTOR_ALARM_TARGET_ARN: alarmTargetArn,
      EXECUTOR_SCHEDULER_ROLE_ARN: this.schedulerRole.roleArn,
    };

    this.alarmFunction = this.rustFunction('AlarmFunction', 'alarm', o, {
      functionName: alarmFunctionName,
      description: 'Executor: session alarms from EventBridge Scheduler',
      // Destroy expires each paused execution of the session: a few store
      // writes each. Invoked asynchronously, so no API Gateway limit applies.
      timeout: Duration.seconds(60),
      architecture,
      removal,
      environment: { ...common, ...scheduling },
    });

    // The public URL is the API's, which the API knows only once created. The
    // functions may reference the API (its integrations reference the
    // functions' ARNs, not their configuration), so this is no cycle; the test
    // "no dependency cycle" checks the template.
    this.api = new apigw.HttpApi(this, 'Api', {
      description: 'Executor: MCP endpoint and approval pages',
      createDefaultStage: false,
    });
    let domain: apigw.DomainName | undefined;
    if (o.domain) {
      domain = new apigw.DomainName(this, 'Domain', {
        domainName: o.domain.name,
        certificate: acm.Certificate.fromCertificateArn(this, 'Certificate', o.domain.certificateArn),
      });
    }
    this.publicUrl = domain ? `https://${o.domain!.name}` : this.api.apiEndpoint;

    const web: Record<string, string> = { ...common, EXECUTOR_PUBLIC_URL: this.publicUrl };
    if (o.approvalWaitMs) web.EXECUTOR_APPROVAL_WAIT_MS = String(o.approvalWaitMs);
    if (o.elicitationMode) web.EXECUTOR_ELICITATION_MODE = o.elicitationMode;
    if (o.oidc) {
      web.EXECUTOR_OIDC_ISSUER = o.oidc.issuer;
      web.EXECUTOR_OIDC_AUDIENCE = o.oidc.audience;
      if (o.oidc.jwksUrl) web.EXECUTOR_OIDC_JWKS_URL = o.oidc.jwksUrl;
      if (o.oidc.ownerClaim) web.EXECUTOR_OIDC_OWNER_CLAIM = o.oidc.ownerClaim;
    }
    const layers: lambda.ILayerVersion[] = [];
    if (o.config) {
      const sources = readSources(o.config.dir, o.config.file);
      const unreadable = sources.secretRefs.filter((ref) => !isGranted(ref, o.secretArns));
      if (unreadable.length > 0) {
        throw new Error(
          `config names secrets the functions could not read: ${unreadable.join(', ')}. ` +
            'Add their complete ARNs to secretArns.',
        );
      }
      this.configLayer = configLayer(this, o.config.dir, sources.files, architecture);
      layers.push(this.configLayer);
      // Layers are extracted under /opt.
      web.EXECUTOR_CONFIG = `/opt/executor/${o.config.file}`;
    }

    // Native approval mode (2026-07-28 clients) seals request states with one
    // HMAC key that every MCP instance shares: generated once, and resolved
    // into the function's environment by CloudFormation at deploy time (the
    // template holds only a reference). CloudFormation re-reads the value only
    // when the function's configuration changes, so a new value in the same
    // secret would not reach the function. Rotation is therefore a new secret:
    // each `requestStateKeyGeneration` is a resource of its own (generation 1
    // keeps the original one), generated anew, and the reference to it changes
    // the MCP function's configuration, so CloudFormation updates the function
    // with the new value (and publishes a version with `versions`); the old
    // secret is deleted after.
    const generation = o.requestStateKeyGeneration;
    const requestStateKeyId = generation === 1 ? 'RequestStateKey' : `RequestStateKey${generation}`;
    this.requestStateKey = new secretsmanager.Secret(this, requestStateKeyId, {
      description:
        'Executor: HMAC key sealing native-mode request states (EXECUTOR_REQUEST_STATE_KEY)' +
        (generation === 1 ? '' : `, generation ${generation}`),
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
      encryptionKey: key,
    });
    Validations.of(this.requestStateKey).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The key is resolved into the MCP function environment at deploy time, so a rotation by Secrets Manager ' +
        'would not reach the function; request states it seals live one approval window. It is replaced by ' +
        'changing requestStateKeyGeneration: a new secret, and the function updated with it.',
    });

    // Per-owner OAuth (auth type `oauth2`): owners' tokens are stored sealed
    // with a key derived from this secret's text, which both HTTP functions
    // read once per cold start (EXECUTOR_TOKEN_KEY_SECRET_ARN names it; the
    // template and the environment never hold its value).
    this.tokenKey = new secretsmanager.Secret(this, 'TokenKey', {
      description: "Executor: key sealing owners' OAuth tokens at rest (EXECUTOR_TOKEN_KEY_SECRET_ARN)",
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
      encryptionKey: key,
      removalPolicy: removal,
    });
    Validations.of(this.tokenKey).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'A new value would make every stored OAuth connection unreadable (owners would connect again), so it ' +
        'is not rotated on a schedule; replace it deliberately.',
    });
    const tokenKey = { EXECUTOR_TOKEN_KEY_SECRET_ARN: this.tokenKey.secretArn };

    this.mcpFunction = this.rustFunction('McpFunction', 'mcp', o, {
      description: 'Executor: MCP endpoint (/mcp, /mcp/toolkits/{name}, /.well-known, /healthz, /readyz)',
      // Memory: `memorySize` (default 1024 MB). QuickJS gets 64 MiB per
      // execution; Lambda's CPU share grows with memory, and the sandbox is CPU-bound.
      timeout: HTTP_FUNCTION_TIMEOUT,
      architecture,
      removal,
      layers,
      environment: {
        ...web,
        ...scheduling,
        ...tokenKey,
        EXECUTOR_REQUEST_STATE_KEY: this.requestStateKey.secretValue.unsafeUnwrap(),
      },
    });
    // Continuations that fail (an error, the timeout) or are never run (the
    // event too old, throttled past its age) go nowhere unless kept: with
    // `continuationDeadLetterQueue`, the approval function's dead-letter queue
    // keeps them (the event names the execution) for 14 days. Only
    // continuations reach it: API Gateway invokes the function synchronously.
    if (o.continuationDeadLetterQueue) {
      this.continuationDeadLetterQueue = new sqs.Queue(this, 'ContinuationDeadLetterQueue', {
        retentionPeriod: Duration.days(14),
        encryption: key ? sqs.QueueEncryption.KMS : sqs.QueueEncryption.SQS_MANAGED,
        encryptionMasterKey: key,
        enforceSSL: true,
        removalPolicy: removal,
      });
    }
    this.approvalFunction = this.rustFunction('ApprovalFunction', 'approval', o, {
      description:
        "Executor: approval pages and API (/approvals, /api, /oauth), the approver's console (/console), " +
        'continuations of long runs',
      // Runs the approved execution's continuation: same sandbox as MCP.
      timeout: CONTINUATION_TIMEOUT,
      deadLetterQueue: this.continuationDeadLetterQueue,
      architecture,
      removal,
      layers,
      // The shared HTTP shell reads the scheduler wiring at start-up, but
      // approvals never arm or cancel alarms: no Scheduler permissions.
      environment: {
        ...web,
        ...scheduling,
        ...tokenKey,
        EXECUTOR_MAX_EXECUTION_MS: String(MAX_EXECUTION.toMilliseconds()),
        // The approver's console (/console): its OIDC sign-in client and session length.
        ...(o.consoleClientId ? { EXECUTOR_CONSOLE_CLIENT_ID: o.consoleClientId } : {}),
        ...(o.consoleSessionMs ? { EXECUTOR_CONSOLE_SESSION_MS: String(o.consoleSessionMs) } : {}),
      },
    });
    // Long runs: the MCP function hands a run past its response budget to the
    // approval function, invoked asynchronously. No retries: the store decides
    // what runs, and a continuation that died is settled as interrupted.
    // With `versions` the continuations invoke the alias, whose asynchronous
    // invocations are configured apart from `$LATEST`'s (kept: invocations
    // already under way when the alias appears).
    this.approvalFunction.configureAsyncInvoke({ retryAttempts: 0 });
    const functions: Record<FunctionName, lambda.Function> = {
      mcp: this.mcpFunction,
      approval: this.approvalFunction,
      alarm: this.alarmFunction,
    };
    if (o.versions) {
      for (const fn of FUNCTIONS) {
        this.aliases[fn] = new lambda.Alias(this, `${capitalise(fn)}Alias`, {
          aliasName: o.versions.aliasName,
          version: functions[fn].currentVersion,
          description: `Executor: the ${fn} function's current version`,
        });
      }
      this.aliases.approval!.configureAsyncInvoke({ retryAttempts: 0 });
    }
    const continuationTarget = this.aliases.approval ?? this.approvalFunction;
    this.mcpFunction.addEnvironment('EXECUTOR_APPROVAL_FUNCTION', continuationTarget.functionName);
    this.mcpFunction.addEnvironment('EXECUTOR_MAX_EXECUTION_MS', String(MAX_EXECUTION.toMilliseconds()));

    // --- Least privilege: what each function's code calls ----------------------
    // DynamoDB (shared/store/src/dynamodb): GetItem (single reads and, through
    // TransactGetItems, chunked executions), PutItem (sessions; execution, chunk
    // and paused-marker puts inside TransactWriteItems), DeleteItem (the paused
    // marker inside TransactWriteItems), Query (a session's paused markers).
    // Transactions have no IAM action of their own: each item is authorised as
    // the underlying GetItem/PutItem/DeleteItem/UpdateItem. UpdateItem only
    // on quota counters; Scan (only the local host's `armed_sessions`) and the
    // API-key writes (`executor keys`) are not granted.
    //
    // Writes are limited to the session and execution partitions: a function
    // reads API keys (partition `KEYS`) but can never mint one. Remembered
    // approvals (partitions `GRANTS#<owner>`) have statements of their own:
    // queried before code runs, put when a person answers "always allow"
    // (the approval page and API; native answers reach the MCP function),
    // deleted only through the approval function's `DELETE /api/grants/{id}`.
    const sessionAndExecutionKeys = {
      'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SESSION#*', 'EXEC#*'] },
    };
    const grantsOnly = (sid: string, actions: string[]) =>
      new iam.PolicyStatement({
        sid,
        actions,
        resources: [this.table.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['GRANTS#*'] } },
      });
    // Per-owner OAuth: an owner's connections (`CONNS#<owner>`) are listed
    // before their code calls such a source, written on a refresh (a claim,
    // then the new tokens) or dropped after a refused one, wherever tools run;
    // the approval function also stores them at the callback and deletes them
    // for `DELETE /api/connections/{source}`. Authorizations in progress
    // (`OAUTH#<executionId>`, one per pause) are put, taken (a conditional
    // update) and released only by the approval function's `/oauth/connect`
    // and `/oauth/callback`.
    const connections = (sid: string) =>
      new iam.PolicyStatement({
        sid,
        actions: ['dynamodb:PutItem', 'dynamodb:DeleteItem', 'dynamodb:Query'],
        resources: [this.table.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['CONNS#*'] } },
      });
    const readTokenKey = new iam.PolicyStatement({
      sid: 'ReadTokenKey',
      actions: ['secretsmanager:GetSecretValue'],
      resources: [this.tokenKey.secretArn],
    });
    const readTable = (sid: string) =>
      new iam.PolicyStatement({ sid, actions: ['dynamodb:GetItem'], resources: [this.table.tableArn] });
    const writeSessionsAndExecutions = (sid: string, actions: string[]) =>
      new iam.PolicyStatement({
        sid,
        actions,
        resources: [this.table.tableArn],
        conditions: sessionAndExecutionKeys,
      });

    // MCP: API keys, sessions and executions read; sessions and executions
    // written; a session's paused work queried when `DELETE /mcp` destroys it.
    // Quotas (shared/store/src/dynamodb/quota.rs): `execute` counts the
    // owner's executions and running slots with conditional updates, only in
    // the owner's quota partition.
    this.grant(this.mcpFunction, [
      readTable('ReadTable'),
      writeSessionsAndExecutions('WriteSessionsAndExecutions', [
        'dynamodb:PutItem',
        'dynamodb:DeleteItem',
        'dynamodb:Query',
      ]),
      new iam.PolicyStatement({
        sid: 'CountQuotas',
        actions: ['dynamodb:UpdateItem'],
        resources: [this.table.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['QUOTA#*'] } },
      }),
      grantsOnly('Grants', ['dynamodb:PutItem', 'dynamodb:Query']),
      connections('Connections'),
      readTokenKey,
      new iam.PolicyStatement({
        sid: 'ContinueLongRuns',
        actions: ['lambda:InvokeFunction'],
        // With `versions`, the alias, and the function itself for runs handed
        // on while the alias is created (both run the same build).
        resources: this.aliases.approval
          ? [this.approvalFunction.functionArn, this.aliases.approval.functionArn]
          : [this.approvalFunction.functionArn],
      }),
    ]);
    // Approval: the API key (`/api` bearer auth) and the execution read; the
    // execution settled or paused again, its session's paused marker written
    // or deleted in the same transaction.
    this.grant(this.approvalFunction, [
      readTable('ReadTable'),
      writeSessionsAndExecutions('WriteExecutions', ['dynamodb:PutItem', 'dynamodb:DeleteItem']),
      grantsOnly('Grants', ['dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:DeleteItem']),
      connections('Connections'),
      new iam.PolicyStatement({
        sid: 'OAuthStates',
        actions: ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
        resources: [this.table.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['OAUTH#*'] } },
      }),
      readTokenKey,
    ]);
    // Alarm (shared/service/src/alarms.rs): session read and updated, paused
    // markers queried, paused executions read and expired. Never an API key.
    this.grant(this.alarmFunction, [
      writeSessionsAndExecutions('SessionsAndExecutions', [
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:DeleteItem',
        'dynamodb:Query',
      ]),
    ]);

    // The event outbox (docs/storage.md): events are put in the transaction of
    // the change they describe, read oldest first and deleted once delivered,
    // by every function; only in the `OUTBOX` partition, and only with events on.
    if (o.events) {
      for (const fn of [this.mcpFunction, this.approvalFunction, this.alarmFunction]) {
        this.grant(fn, [
          new iam.PolicyStatement({
            sid: 'EventOutbox',
            actions: ['dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:DeleteItem'],
            resources: [this.table.tableArn],
            conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['OUTBOX'] } },
          }),
        ]);
        this.eventBus?.grantPutEventsTo(fn);
      }
    }
    if (o.events?.approvalEmail) {
      this.approvalEmail = new ApprovalEmail(this, 'ApprovalEmail', {
        bus: this.eventBus!,
        address: o.events.approvalEmail,
        removal,
      });
    }

    // Scheduler (shared/scheduler/src/eventbridge.rs): MCP arms a new
    // session's alarm and deletes it on `DELETE /mcp`; the alarm reschedules,
    // extends the paused lease, or deletes on destroy. Create falls back to
    // update when the schedule exists. Schedule names are per session, made at
    // run time: the resource is `<group>/executor-session-*`.
    for (const fn of [this.mcpFunction, this.alarmFunction]) {
      this.grant(fn, [
        new iam.PolicyStatement({
          sid: 'ManageSessionAlarms',
          actions: ['scheduler:CreateSchedule', 'scheduler:UpdateSchedule', 'scheduler:DeleteSchedule'],
          resources: [schedulesArn],
        }),
        // Creating a schedule passes its target role: only the scheduler's, only to Scheduler.
        new iam.PolicyStatement({
          sid: 'PassSchedulerRole',
          actions: ['iam:PassRole'],
          resources: [this.schedulerRole.roleArn],
          conditions: { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } },
        }),
      ]);
      Validations.of(fn.role!).acknowledge({
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/${groupName}/executor-session-*]`,
        reason:
          'One schedule per session alarm, named at run time (executor-session-<sessionId>-<generation>); the grant covers ' +
          "only such schedules in this stack's group. Scheduler offers no narrower resource.",
      });
    }

    // Secrets named by the sources file (catalog auth): the functions that call tools.
    if (o.secretArns.length > 0) {
      for (const fn of [this.mcpFunction, this.approvalFunction]) {
        this.grant(fn, [
          new iam.PolicyStatement({
            sid: 'ReadSourceSecrets',
            actions: ['secretsmanager:GetSecretValue'],
            resources: o.secretArns,
          }),
        ]);
      }
    }

    // The dead-letter queue: Lambda sends the failed event with the approval function's role.
    if (this.continuationDeadLetterQueue) {
      this.grant(this.approvalFunction, [
        new iam.PolicyStatement({
          sid: 'KeepFailedContinuations',
          actions: ['sqs:SendMessage'],
          resources: [this.continuationDeadLetterQueue.queueArn],
        }),
      ]);
    }

    // The customer-managed key, through the services that use it for each
    // function: DynamoDB (every function), Secrets Manager (the token key,
    // read by the HTTP functions), SQS (the dead-letter queue). The
    // request-state key is read by CloudFormation, with the deploying role.
    if (key) {
      const services: Record<FunctionName, string[]> = {
        mcp: ['dynamodb', 'secretsmanager'],
        approval: ['dynamodb', 'secretsmanager', ...(this.continuationDeadLetterQueue ? ['sqs'] : [])],
        alarm: ['dynamodb'],
      };
      for (const fn of FUNCTIONS) this.grant(functions[fn], [useKey(this, key, services[fn])]);
    }

    // --- HTTP API ----------------------------------------------------------------
    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      retention: o.logRetentionDays as logs.RetentionDays,
      encryptionKey: key,
      removalPolicy: removal,
    });
    const stage = new apigw.HttpStage(this, 'DefaultStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      // Every route: past it, API Gateway answers 429 without invoking a function.
      throttle: o.throttle ? { rateLimit: o.throttle.rateLimit, burstLimit: o.throttle.burstLimit } : undefined,
      domainMapping: domain ? { domainName: domain } : undefined,
      accessLogSettings: {
        destination: new apigw.LogGroupLogDestination(accessLogs),
        // The path without the query string: approval links carry their token there.
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            time: '$context.requestTime',
            ip: '$context.identity.sourceIp',
            method: '$context.httpMethod',
            path: '$context.path',
            route: '$context.routeKey',
            status: '$context.status',
            bytes: '$context.responseLength',
            latencyMs: '$context.responseLatency',
            integrationError: '$context.integrationErrorMessage',
          }),
        ),
      },
    });

    // With `versions`, the routes invoke the aliases.
    const mcp = new HttpLambdaIntegration('Mcp', this.aliases.mcp ?? this.mcpFunction);
    const approval = new HttpLambdaIntegration('Approval', this.aliases.approval ?? this.approvalFunction);
    const routes: [string, HttpLambdaIntegration][] = [
      ['/mcp', mcp],
      // Toolkits: narrower views of the same MCP function.
      ['/mcp/toolkits/{name}', mcp],
      ['/.well-known/{proxy+}', mcp],
      ['/healthz', mcp],
      // Readiness: whether every source is connected (200) or which are not (503).
      ['/readyz', mcp],
      ['/approvals/{proxy+}', approval],
      // The approver's console: its pages, its sign-in (OIDC callback under /console/oidc) and its actions.
      ['/console', approval],
      ['/console/{proxy+}', approval],
      ['/api/{proxy+}', approval],
      // Per-owner OAuth (the connect link, the authorization server's redirect back) and the client
      // metadata document that authorization servers of upstream MCP servers read.
      ['/oauth/{proxy+}', approval],
    ];
    for (const [routePath, integration] of routes) {
      // ANY: the functions answer each method themselves (405, CORS preflight).
      for (const route of this.api.addRoutes({ path: routePath, methods: [apigw.HttpMethod.ANY], integration })) {
        Validations.of(route).acknowledge({
          id: 'AwsSolutions-APIG4',
          reason:
            'The functions authenticate every request themselves: API keys (hashed in the table) or OIDC ' +
            'JWTs on /mcp and /api, single-use approval tokens on /approvals and /oauth/connect, single-use ' +
            'OAuth states on /oauth/callback, a signed-in session cookie on /console (its sign-in is public); ' +
            '/healthz, /readyz, the RFC 9728 metadata under /.well-known and the OAuth ' +
            'client metadata document under /oauth are public by design. An API Gateway authorizer cannot check API keys.',
        });
      }
    }

    // --- Operations: docs/deploy.md, "Alarms and dashboard" ---------------------------
    if (o.alarms) {
      this.observability = new Observability(this, 'Observability', {
        api: this.api,
        stage,
        table: this.table,
        functions,
        topicArn: o.alarmTopicArn,
        functionAlarms: o.functionAlarms,
        continuationDeadLetterQueue: this.continuationDeadLetterQueue,
      });
    }

    // --- The first API key: docs/deploy.md, "The first key" -------------------------
    if (o.initialKey) {
      this.initialKey = new InitialKey(this, 'InitialKey', {
        table: this.table,
        owner: o.initialKey.owner,
        generation: o.initialKey.generation,
        removal,
        logRetentionDays: o.logRetentionDays,
        encryptionKey: key,
        roleName: this.roleName('initial-key'),
      });
      new CfnOutput(this, 'InitialKeySecretArn', {
        description: `Secrets Manager secret holding the API key token of ${o.initialKey.owner}`,
        value: this.initialKey.secret.secretArn,
      });
    }

    // --- Outputs -------------------------------------------------------------------
    new CfnOutput(this, 'McpUrl', { description: 'MCP endpoint for clients', value: `${this.publicUrl}/mcp` });
    new CfnOutput(this, 'ApprovalBaseUrl', {
      description: 'Base of the approval pages',
      value: `${this.publicUrl}/approvals/`,
    });
    new CfnOutput(this, 'TableName', {
      description: 'The DynamoDB table (EXECUTOR_TABLE)',
      value: this.table.tableName,
    });
    new CfnOutput(this, 'ApiEndpoint', { description: "The API's own endpoint", value: this.api.apiEndpoint });
    if (this.continuationDeadLetterQueue) {
      new CfnOutput(this, 'ContinuationDeadLetterQueueUrl', {
        description:
          "Continuations of long runs that failed or were never run (the approval function's dead-letter queue)",
        value: this.continuationDeadLetterQueue.queueUrl,
      });
    }
    if (this.encryptionKey && o.encryption && 'create' in o.encryption) {
      new CfnOutput(this, 'EncryptionKeyArn', {
        description: 'The KMS key encrypting the table, secrets, log groups and dead-letter queue',
        value: this.encryptionKey.keyArn,
      });
    }
    if (this.eventBus) {
      new CfnOutput(this, 'EventBusName', {
        description: 'Lifecycle events (EXECUTOR_EVENT_BUS): add rules for Slack, e-mail, ... (docs/events.md)',
        value: this.eventBus.eventBusName,
      });
    }
    if (domain) {
      new CfnOutput(this, 'DomainTarget', {
        description: `DNS: point ${o.domain!.name} (CNAME or alias) at this name`,
        value: domain.regionalDomainName,
      });
    }
  }

  /**
   * A Rust function: its own role and log group, nothing else granted; the
   * per-function options (environment, layers, reserved concurrency) and the
   * stack-wide ones (tracing, VPC) applied.
   */
  private rustFunction(
    id: string,
    name: FunctionName,
    o: Resolved,
    props: {
      functionName?: string;
      description: string;
      timeout: Duration;
      architecture: lambda.Architecture;
      removal: RemovalPolicy;
      layers?: lambda.ILayerVersion[];
      environment: Record<string, string>;
      /** Where Lambda sends asynchronous invocations that failed (the role's grant is the caller's). */
      deadLetterQueue?: sqs.IQueue;
    },
  ): lambda.Function {
    const settings = o.functions[name];
    for (const variable of Object.keys(settings.environment)) {
      if (variable in props.environment) {
        throw new Error(`environment.${name}: ${variable} is set by the stack; use its option instead`);
      }
    }
    const layers = [
      ...(props.layers ?? []),
      ...settings.layerArns.map((arn, i) => lambda.LayerVersion.fromLayerVersionArn(this, `${id}Layer${i}`, arn)),
    ];
    if (layers.length > MAX_LAYERS) {
      throw new Error(
        `layerArns: the ${name} function would have ${layers.length} layers` +
          `${props.layers?.length ? ' (the sources layer included)' : ''}; Lambda allows ${MAX_LAYERS}`,
      );
    }
    const logGroup = new logs.LogGroup(this, `${id}Logs`, {
      retention: o.logRetentionDays as logs.RetentionDays,
      encryptionKey: this.encryptionKey,
      removalPolicy: props.removal,
    });
    // Not AWSLambdaBasicExecutionRole: its logs grant is on every log group.
    const role = new iam.Role(this, `${id}Role`, {
      roleName: this.roleName(name),
      description: `${props.description} (function role)`,
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteOwnLogs',
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        // The log group's Arn attribute ends in `:*` (its streams).
        resources: [logGroup.logGroupArn],
      }),
    );
    const fn = new lambda.Function(this, id, {
      functionName: props.functionName,
      description: props.description,
      runtime: lambda.Runtime.PROVIDED_AL2023,
      architecture: props.architecture,
      handler: 'bootstrap',
      // Only the binary: a `bootstrap.zip` from `--output-format zip` may sit next to it.
      code: lambda.Code.fromAsset(bootstrapDir(o.assetDir, BINARIES[name], o.architecture), {
        exclude: ['*', '!bootstrap'],
      }),
      memorySize: settings.memorySize,
      timeout: props.timeout,
      role,
      logGroup,
      layers: layers.length > 0 ? layers : undefined,
      environment: { ...props.environment, ...settings.environment },
      reservedConcurrentExecutions: settings.reservedConcurrency,
      // X-Ray: Lambda samples and passes `_X_AMZN_TRACE_ID` with `Sampled=1`,
      // which the telemetry crate inherits (docs/operations.md).
      tracing: o.tracing ? lambda.Tracing.ACTIVE : undefined,
      // With `versions`: a version is published whenever the configuration or
      // the code changes; the old ones are kept, so that the alias can be
      // pointed back (`aws lambda update-alias`), and go with the function.
      currentVersionOptions: o.versions ? { removalPolicy: RemovalPolicy.RETAIN } : undefined,
    });
    if (props.deadLetterQueue) {
      // Set on the template: the construct's own grant has no statement id.
      (fn.node.defaultChild as lambda.CfnFunction).deadLetterConfig = { targetArn: props.deadLetterQueue.queueArn };
    }
    const wildcards: string[] = [];
    if (o.tracing) {
      wildcards.push('X-Ray (PutTraceSegments, PutTelemetryRecords) has no resource-level permissions');
    }
    if (o.vpc) {
      // Set on the template rather than through `vpc`: that needs an IVpc,
      // i.e. a lookup (no offline synth) or a VPC ID and its zones, for
      // nothing the functions use; and it attaches a managed policy.
      (fn.node.defaultChild as lambda.CfnFunction).vpcConfig = {
        subnetIds: o.vpc.subnetIds,
        securityGroupIds: o.vpc.securityGroupIds,
      };
      // What AWSLambdaVPCAccessExecutionRole grants: Lambda creates the
      // function's network interfaces with its role.
      role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'VpcNetworkInterfaces',
          actions: [
            'ec2:CreateNetworkInterface',
            'ec2:DescribeNetworkInterfaces',
            'ec2:DescribeSubnets',
            'ec2:DeleteNetworkInterface',
            'ec2:AssignPrivateIpAddresses',
            'ec2:UnassignPrivateIpAddresses',
          ],
          resources: ['*'],
        }),
      );
      wildcards.push(
        "Lambda's network-interface actions (ec2:CreateNetworkInterface, Describe*, ...) are granted on * " +
          "exactly as AWSLambdaVPCAccessExecutionRole does; the interfaces' IDs are not known before Lambda makes them",
      );
    }
    if (wildcards.length > 0) {
      Validations.of(role).acknowledge({ id: 'AwsSolutions-IAM5[Resource::*]', reason: wildcards.join('; ') });
    }
    return fn;
  }

  private grant(fn: lambda.Function, statements: iam.PolicyStatement[]) {
    for (const statement of statements) fn.role!.addToPrincipalPolicy(statement);
  }

  /** `<prefix><stack>-<role>` with `roleNamePrefix`, else none (CloudFormation generates one). */
  private roleName(suffix: (typeof ROLE_SUFFIXES)[number]): string | undefined {
    return this.options.roleNamePrefix === undefined
      ? undefined
      : `${this.options.roleNamePrefix}${this.stackName}-${suffix}`;
  }
}

function capitalise(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/**
 * The directory holding `<assetDir>/<binary>/bootstrap`, checked: it must
 * exist, and an ELF binary must match the architecture (an x86_64 build on
 * arm64 would fail only at the first request, with "exec format error").
 */
export function bootstrapDir(assetDir: string, binary: string, architecture: 'arm64' | 'x86_64'): string {
  const dir = path.join(assetDir, binary);
  const file = path.join(dir, 'bootstrap');
  if (!fs.existsSync(file)) {
    throw new Error(
      `no Lambda build of ${binary} at ${file}. Build the functions first (README, "Deploying"): ` +
        `cargo lambda build --profile lambda ${architecture === 'arm64' ? '--arm64' : '--x86-64'} ` +
        '--lambda-dir target/lambda-functions ...' +
        ', or point the assetDir context at the directory holding <binary>/bootstrap',
    );
  }
  const header = Buffer.alloc(20);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, header, 0, 20, 0);
  } finally {
    fs.closeSync(fd);
  }
  if (header.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) {
    const machine = header.readUInt16LE(18); // e_machine, little-endian ELF
    const found = machine === 0xb7 ? 'arm64' : machine === 0x3e ? 'x86_64' : `machine 0x${machine.toString(16)}`;
    if (found !== architecture) {
      throw new Error(
        `${file} is built for ${found}, but the functions are deployed as ${architecture}: ` +
          `rebuild with ${architecture === 'arm64' ? '--arm64' : '--x86-64'} or set -c architecture=${found}`,
      );
    }
  }
  return dir;
}

/**
 * The sources file and the local files it names (OpenAPI specs, GraphQL
 * schemas, the catalog index, Cedar policies), as a layer under /opt/executor. A layer keeps
 * each function's code exactly the cargo-lambda output (the same asset
 * whatever the sources), is shared by the MCP and approval functions, and
 * changing the sources publishes a new layer version without rebuilding
 * anything.
 */
function configLayer(
  scope: Construct,
  dir: string,
  files: string[],
  architecture: lambda.Architecture,
): lambda.LayerVersion {
  return new lambda.LayerVersion(scope, 'SourcesConfig', {
    description: 'Executor: the sources file (EXECUTOR_CONFIG) and its local specs',
    compatibleRuntimes: [lambda.Runtime.PROVIDED_AL2023],
    compatibleArchitectures: [architecture],
    code: lambda.Code.fromAsset(dir, {
      // Hashed by what is shipped, not by the (possibly large) directory around the file.
      assetHashType: AssetHashType.OUTPUT,
      bundling: {
        // Copied locally; the image is never used (no Docker needed).
        image: DockerImage.fromRegistry('unused'),
        local: {
          tryBundle(outputDir: string) {
            for (const file of files) {
              const target = path.join(outputDir, 'executor', file);
              fs.mkdirSync(path.dirname(target), { recursive: true });
              fs.copyFileSync(path.join(dir, file), target);
            }
            return true;
          },
        },
      },
    }),
  });
}
