// Approval requests by e-mail (docs/events.md): a rule on the event bus turns
// each browser-mode `Execution Paused` into a readable message with the
// approval link, published to an SNS topic with one e-mail subscription.

import { RemovalPolicy } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';

export interface ApprovalEmailProps {
  bus: events.IEventBus;
  /** Who gets the messages; SNS asks them to confirm the subscription first. */
  address: string;
  removal: RemovalPolicy;
}

/** The e-mail: what needs approval, the tool's own words, and the link. */
export function approvalMessage(): events.RuleTargetInput {
  const field = (path: string) => events.EventField.fromPath(`$.detail.${path}`);
  // One text: SNS sends it as the e-mail's body, line breaks included.
  return events.RuleTargetInput.fromText(
    [
      `${field('tool')} is waiting for your approval (owner ${field('owner')}).`,
      '',
      `${field('message')}`,
      '',
      `Approve or decline before ${field('expiresAt')}:`,
      `${field('approvalUrl')}`,
      '',
      `Execution ${field('executionId')}. Anyone with this link can decide: do not forward it.`,
    ].join('\n'),
  );
}

export class ApprovalEmail extends Construct {
  readonly topic: sns.Topic;
  readonly rule: events.Rule;
  readonly key: kms.Key;

  constructor(scope: Construct, id: string, props: ApprovalEmailProps) {
    super(scope, id);
    // A key of our own: EventBridge cannot publish to a topic encrypted with
    // the AWS-managed SNS key.
    this.key = new kms.Key(this, 'Key', {
      description: 'Executor: encrypts the approval e-mail topic',
      enableKeyRotation: true,
      removalPolicy: props.removal,
    });
    this.key.grant(new iam.ServicePrincipal('events.amazonaws.com'), 'kms:Decrypt', 'kms:GenerateDataKey*');
    this.topic = new sns.Topic(this, 'Topic', {
      displayName: 'Executor approvals',
      masterKey: this.key,
      enforceSSL: true,
    });
    this.topic.addSubscription(new subscriptions.EmailSubscription(props.address));
    this.rule = new events.Rule(this, 'Rule', {
      description: 'Executor: each pause with an approval link, as an e-mail',
      eventBus: props.bus,
      // Only pauses a person decides by link (browser mode) carry one.
      eventPattern: {
        source: ['executor'],
        detailType: ['Execution Paused'],
        detail: { approvalUrl: [{ exists: true }] },
      },
      targets: [new targets.SnsTopic(this.topic, { message: approvalMessage() })],
    });
  }
}
