#!/usr/bin/env node
// The CDK app: one ExecutorStack, options from context (see lib/options.ts and
// the README's "Deploying"), checked by cdk-nag's AwsSolutions rules.

import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';

import { ExecutorStack } from '../lib/executor-stack';
import { optionsFromContext } from '../lib/options';

const app = new App();
const stackName = String(app.node.tryGetContext('stackName') || 'ExecutorStack');
// Environment-agnostic: account and region come from the deploying
// credentials, and synth needs neither credentials nor network (no lookups).
new ExecutorStack(app, stackName, {
  description: 'Executor on Lambda: code-mode MCP gateway',
  ...optionsFromContext((key) => app.node.tryGetContext(key)),
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
