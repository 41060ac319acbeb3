// Lifecycle events (docs/events.md): the optional bus, who may put events on
// it, the outbox grants, the approval e-mail (topic, subscription, rule).

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { IConstruct } from 'constructs';

import { resolve } from '../lib/options';
import { resources, statementsOf, synth } from './helpers';

const FUNCTION_ROLES = ['McpRole', 'ApprovalRole', 'AlarmRole'];
const FUNCTIONS = ['McpFunction', 'ApprovalFunction', 'AlarmFunction'];
const OUTBOX = {
  Sid: 'EventOutbox',
  Effect: 'Allow',
  Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Query'],
  Resource: ['${Table.Arn}'],
  Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['OUTBOX'] } },
};

const one = (rendered: Record<string, any>, type: string) => {
  const found = Object.entries(resources(rendered, type));
  assert.equal(found.length, 1, `one ${type}`);
  return { id: found[0][0], resource: found[0][1] };
};
const variables = (rendered: Record<string, any>, fn: string) =>
  rendered.Resources[fn].Properties.Environment.Variables as Record<string, string>;
const putEvents = (statements: any[]) =>
  statements.filter((s) => ([] as string[]).concat(s.Action).includes('events:PutEvents'));

describe('events', () => {
  test('off by default: no bus, no event settings, no outbox or PutEvents grant', () => {
    const { rendered } = synth();
    assert.deepEqual(Object.keys(resources(rendered, 'AWS::Events::EventBus')), []);
    for (const fn of FUNCTIONS) {
      assert.deepEqual(
        Object.keys(variables(rendered, fn)).filter((v) => v.startsWith('EXECUTOR_EVENT')),
        [],
        fn,
      );
    }
    for (const role of FUNCTION_ROLES) {
      const statements = statementsOf(rendered, role);
      assert.deepEqual(putEvents(statements), [], role);
      assert.equal(statements.filter((s) => s.Sid === 'EventOutbox').length, 0, role);
    }
  });

  test('eventBus: a bus whose name every function gets, and only they may put events on it', () => {
    const { rendered } = synth({ eventBus: true, initialKeyOwner: 'admin@example.com' });
    const bus = one(rendered, 'AWS::Events::EventBus');
    for (const fn of FUNCTIONS) assert.equal(variables(rendered, fn).EXECUTOR_EVENT_BUS, `\${${bus.id}}`, fn);
    for (const role of FUNCTION_ROLES) {
      const statements = statementsOf(rendered, role);
      assert.deepEqual(
        putEvents(statements),
        [{ Effect: 'Allow', Action: ['events:PutEvents'], Resource: [`\${${bus.id}.Arn}`] }],
        role,
      );
      assert.deepEqual(
        statements.filter((s) => s.Sid === 'EventOutbox'),
        [OUTBOX],
        role,
      );
    }
    for (const role of ['SchedulerRole', 'InitialKeyRole']) assert.deepEqual(putEvents(statementsOf(rendered, role)), [], role);
    // No one else is granted PutEvents on it (no resource policy opens it).
    assert.deepEqual(Object.keys(resources(rendered, 'AWS::Events::EventBusPolicy')), []);
    assert.equal(rendered.Outputs.EventBusName.Value, `\${${bus.id}}`);
  });

  test('eventWebhook alone: the URL on every function and the outbox grant, no bus', () => {
    const { rendered } = synth({ eventWebhook: 'https://hooks.example.com/executor' });
    assert.deepEqual(Object.keys(resources(rendered, 'AWS::Events::EventBus')), []);
    for (const fn of FUNCTIONS) {
      assert.equal(variables(rendered, fn).EXECUTOR_EVENT_WEBHOOK, 'https://hooks.example.com/executor', fn);
      assert.equal(variables(rendered, fn).EXECUTOR_EVENT_BUS, undefined, fn);
    }
    for (const role of FUNCTION_ROLES) {
      assert.deepEqual(
        statementsOf(rendered, role).filter((s) => s.Sid === 'EventOutbox'),
        [OUTBOX],
        role,
      );
    }
  });

  test('approvalEmail: a rule sends browser-mode pauses to an encrypted topic as a message with the link', () => {
    const { rendered } = synth({ approvalEmail: 'ops@example.com' });
    const bus = one(rendered, 'AWS::Events::EventBus');
    const topic = one(rendered, 'AWS::SNS::Topic');
    const key = one(rendered, 'AWS::KMS::Key');
    assert.equal(topic.resource.Properties.KmsMasterKeyId, `\${${key.id}.Arn}`);
    assert.equal(key.resource.Properties.EnableKeyRotation, true);
    const forEvents = key.resource.Properties.KeyPolicy.Statement.find(
      (s: any) => s.Principal?.Service === 'events.amazonaws.com',
    );
    assert.deepEqual([].concat(forEvents.Action).sort(), ['kms:Decrypt', 'kms:GenerateDataKey*']);

    const subscription = one(rendered, 'AWS::SNS::Subscription').resource.Properties;
    assert.deepEqual(subscription, { Endpoint: 'ops@example.com', Protocol: 'email', TopicArn: `\${${topic.id}}` });

    const rule = one(rendered, 'AWS::Events::Rule').resource.Properties;
    assert.equal(rule.EventBusName, `\${${bus.id}}`);
    assert.deepEqual(rule.EventPattern, {
      source: ['executor'],
      'detail-type': ['Execution Paused'],
      detail: { approvalUrl: [{ exists: true }] },
    });
    assert.equal(rule.Targets.length, 1);
    const [target] = rule.Targets;
    assert.equal(target.Arn, `\${${topic.id}}`);
    const paths = target.InputTransformer.InputPathsMap;
    const template: string = target.InputTransformer.InputTemplate;
    for (const field of ['tool', 'message', 'expiresAt', 'approvalUrl', 'executionId']) {
      const name = Object.keys(paths).find((k) => paths[k] === `$.detail.${field}`);
      assert.ok(name && template.includes(`<${name}>`), `the message shows ${field}: ${template}`);
    }
    // A readable text, not the event's JSON.
    assert.match(template, /is waiting for your approval/);
    assert.ok(!template.includes('$.detail'), template);

    // EventBridge, and only it, may publish to the topic; only over TLS.
    const policy = one(rendered, 'AWS::SNS::TopicPolicy').resource.Properties.PolicyDocument.Statement;
    const allows = policy.filter((s: any) => s.Effect === 'Allow');
    assert.deepEqual(
      allows.map((s: any) => [s.Principal, s.Action]),
      [[{ Service: 'events.amazonaws.com' }, 'sns:Publish']],
    );
    assert.ok(policy.some((s: any) => s.Effect === 'Deny' && s.Condition?.Bool?.['aws:SecureTransport'] === 'false'));
    // The e-mail implies the bus the functions put events on.
    for (const fn of FUNCTIONS) assert.equal(variables(rendered, fn).EXECUTOR_EVENT_BUS, `\${${bus.id}}`, fn);
  });

  test('mistakes fail the synth', () => {
    const cases: [object, RegExp][] = [
      [{ eventWebhook: 'http://hooks.example.com/x' }, /eventWebhook: expected an https:\/\/ URL/],
      [{ eventWebhook: 'https://user:pw@hooks.example.com/' }, /eventWebhook: expected an https:\/\/ URL/],
      [{ approvalEmail: 'ops' }, /approvalEmail: expected an e-mail address/],
      [
        { environment: { all: { EXECUTOR_EVENT_WEBHOOK: 'https://hooks.example.com/x' } } },
        /environment.all: set EXECUTOR_EVENT_WEBHOOK with the eventWebhook option instead/,
      ],
      [{ environment: { alarm: { EXECUTOR_EVENT_BUS: 'default' } } }, /with the eventBus option instead/],
    ];
    for (const [options, message] of cases) assert.throws(() => resolve(options), message);
  });

  test('cdk-nag: the bus, the topic and the rule add no finding and no acknowledgement', () => {
    const acknowledged = (scope: IConstruct) =>
      scope.node
        .findAll()
        .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
        .flatMap((m) => Object.keys(m.data as object))
        .sort();
    const plain = synth().stack;
    const { stack } = synth({ eventBus: true, eventWebhook: 'https://hooks.example.com/x', approvalEmail: 'ops@example.com' });
    const report = new AwsSolutionsChecks().validateScope(stack);
    assert.deepEqual(
      report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.resourceLogicalId)}`),
      [],
    );
    assert.deepEqual(acknowledged(stack), acknowledged(plain));
  });
});
