//! Discovery on real catalogs: tasks phrased as people ask them, searched in
//! published API documents (GitHub's, Directus'), fetched by the test set-up
//! (`executor_tests::api_documents`). Prints recall@1, recall@5 and MRR of
//! `tools.search` beside a plain BM25 ranking computed in the same run, and
//! holds the bar of docs/benchmarks.md ("Discovery"):
//!
//! `cargo test -p executor-catalog --test discovery -- --nocapture`
//!
//! Each document's tasks come in parts: the tuned part is what the
//! ranking's weights and vocabulary were fitted on, a held-out part was
//! written before its results were ever run and only its figures are seen
//! (this test prints the misses of the tuned part alone). The tuned part's
//! second half was written as the first held-out part, and its misses were
//! seen when tuning began, so it joined the tuned part and the held-out
//! part was written anew. In a third round, 60 GitHub and 12 Directus tasks
//! were written as more tuned tasks before any of their results were run;
//! in a fourth, 43 GitHub tasks more from areas none of the others touched;
//! in a fifth, 41 everyday GitHub tasks naming no operation a held-out task names;
//! in a sixth, 148 GitHub tasks dealt alternately into the tuned part and a
//! second held-out part; in a seventh, 100 GitHub tasks by a writer who had
//! seen neither the other tasks nor the vocabulary, of which the 80 naming
//! no operation a held-out task names joined the tuned part; in an eighth,
//! 80 more by another such writer, joined the same way.
//! A task lists every operation that does the job (by `operationId`); a
//! hit is any of them. `DISCOVERY_TUNED_ONLY=1` runs the tuned part alone,
//! for tuning.

use std::collections::HashMap;

use executor_catalog::{Catalog, CatalogConfig};
use executor_sandbox::Tools;
use executor_tests::api_documents::{DIRECTUS, GITHUB, Published};
use serde_json::{Value, json};

type Tasks = &'static [(&'static str, &'static [&'static str])];

const GITHUB_TUNED: Tasks = &[
    ("open a pull request", &["pulls/create"]),
    ("who am I logged in as", &["users/get-authenticated"]),
    ("what branches does this repo have", &["repos/list-branches"]),
    ("read a file from a repository", &["repos/get-content"]),
    ("delete a branch", &["git/delete-ref"]),
    ("merge a PR", &["pulls/merge"]),
    ("show the open issues of a repo", &["issues/list-for-repo"]),
    ("file a bug report in a repo", &["issues/create"]),
    ("comment on an issue", &["issues/create-comment"]),
    ("close an issue", &["issues/update"]),
    ("put a label on an issue", &["issues/add-labels", "issues/set-labels"]),
    ("assign an issue to someone", &["issues/add-assignees"]),
    ("star a repository", &["activity/star-repo-for-authenticated-user"]),
    ("list my repos", &["repos/list-for-authenticated-user"]),
    (
        "create a new repository",
        &["repos/create-for-authenticated-user", "repos/create-in-org", "repos/create-using-template"],
    ),
    ("fork a repo", &["repos/create-fork"]),
    ("what is the latest release", &["repos/get-latest-release"]),
    ("publish a new release", &["repos/create-release"]),
    ("list recent CI runs", &["actions/list-workflow-runs-for-repo", "actions/list-workflow-runs"]),
    (
        "retry a failed CI build",
        &["actions/re-run-workflow-failed-jobs", "actions/re-run-workflow", "actions/re-run-job-for-workflow-run"],
    ),
    ("trigger a workflow manually", &["actions/create-workflow-dispatch"]),
    (
        "download the logs of a CI run",
        &["actions/download-workflow-run-logs", "actions/download-job-logs-for-workflow-run"],
    ),
    ("ask someone to review my PR", &["pulls/request-reviewers"]),
    ("approve a pull request", &["pulls/create-review", "pulls/submit-review"]),
    ("which files did a PR change", &["pulls/list-files"]),
    ("list the commits in a pull request", &["pulls/list-commits"]),
    ("search code for a function name", &["search/code"]),
    ("find issues that mention a crash", &["search/issues-and-pull-requests"]),
    ("find repositories about machine learning", &["search/repos"]),
    ("who has access to this repo", &["repos/list-collaborators"]),
    ("give a user write access to a repository", &["repos/add-collaborator"]),
    ("share a code snippet as a gist", &["gists/create"]),
    ("show my unread notifications", &["activity/list-notifications-for-authenticated-user"]),
    ("mark all notifications as read", &["activity/mark-notifications-as-read"]),
    ("thumbs up an issue comment", &["reactions/create-for-issue-comment"]),
    ("set a secret for GitHub Actions in a repo", &["actions/create-or-update-repo-secret"]),
    ("list the people in an org", &["orgs/list-members"]),
    (
        "did the checks pass on a commit",
        &["checks/list-for-ref", "repos/get-combined-status-for-ref", "repos/list-commit-statuses-for-ref"],
    ),
    ("add a webhook to a repository", &["repos/create-webhook"]),
    ("list the tags of a repo", &["repos/list-tags"]),
    ("compare two branches", &["repos/compare-commits", "repos/compare-commits-with-basehead"]),
    ("get details of a commit", &["repos/get-commit", "git/get-commit"]),
    ("commit a change to a file", &["repos/create-or-update-file-contents"]),
    ("protect the main branch", &["repos/update-branch-protection"]),
    ("list all releases of a project", &["repos/list-releases"]),
    ("look up a user by their username", &["users/get-by-username"]),
    ("follow a user", &["users/follow"]),
    ("how many API requests do I have left", &["rate-limit/get"]),
    ("list the PRs of a repo", &["pulls/list"]),
    ("lock an issue so no one can comment", &["issues/lock"]),
    // Written as held out; seen while tuning began, so tuned on since.
    ("reopen a closed pull request", &["pulls/update"]),
    ("comment on a specific line of a PR diff", &["pulls/create-review-comment"]),
    ("delete a repository", &["repos/delete"]),
    ("rename a repo", &["repos/update"]),
    ("archive a repository", &["repos/update"]),
    ("what languages is this repo written in", &["repos/list-languages"]),
    ("who contributed to this project", &["repos/list-contributors"]),
    ("stop a running CI job", &["actions/cancel-workflow-run", "actions/force-cancel-workflow-run"]),
    (
        "list the jobs of a workflow run",
        &["actions/list-jobs-for-workflow-run", "actions/list-jobs-for-workflow-run-attempt"],
    ),
    ("download a build artifact", &["actions/download-artifact"]),
    ("show the deploy keys of a repo", &["repos/list-deploy-keys"]),
    ("add an SSH key to my account", &["users/create-public-ssh-key-for-authenticated-user"]),
    ("what email addresses are on my account", &["users/list-emails-for-authenticated-user"]),
    ("take a label off an issue", &["issues/remove-label"]),
    ("create a milestone", &["issues/create-milestone"]),
    ("what labels exist in a repo", &["issues/list-labels-for-repo"]),
    ("edit my comment on an issue", &["issues/update-comment"]),
    ("delete a comment on an issue", &["issues/delete-comment"]),
    ("unstar a repo", &["activity/unstar-repo-for-authenticated-user"]),
    ("who starred this repository", &["activity/list-stargazers-for-repo"]),
    ("watch a repo to get notified", &["activity/set-repo-subscription"]),
    ("list the forks of a repository", &["repos/list-forks"]),
    ("move a repo to another org", &["repos/transfer"]),
    ("get the README of a repo", &["repos/get-readme"]),
    ("create a branch", &["git/create-ref"]),
    ("list the teams of an organization", &["teams/list"]),
    ("add someone to a team", &["teams/add-or-update-membership-for-user-in-org"]),
    ("remove a user from an org", &["orgs/remove-member", "orgs/remove-membership-for-user"]),
    ("list dependabot alerts for a repo", &["dependabot/list-alerts-for-repo"]),
    ("show code scanning alerts", &["code-scanning/list-alerts-for-repo", "code-scanning/list-alerts-for-org"]),
    ("were any secrets leaked in this repo", &["secret-scanning/list-alerts-for-repo"]),
    ("convert markdown to HTML", &["markdown/render", "markdown/render-raw"]),
    ("what license does this repo use", &["licenses/get-for-repo"]),
    ("list someone's gists", &["gists/list-for-user"]),
    ("deploy a branch to production", &["repos/create-deployment"]),
    ("list the deployment environments of a repo", &["repos/get-all-environments"]),
    ("turn on GitHub Pages for a repo", &["repos/create-pages-site"]),
    ("show the reviews on a PR", &["pulls/list-reviews"]),
    ("has this PR been merged", &["pulls/check-if-merged"]),
    ("list the workflows in a repo", &["actions/list-repo-workflows"]),
    // Written in the third round (2026-12-02) as more tuned tasks, before any of their results were run.
    ("who follows me", &["users/list-followers-for-authenticated-user"]),
    ("list the people a user is following", &["users/list-following-for-user"]),
    ("block a user who keeps spamming me", &["users/block"]),
    ("upload my GPG key", &["users/create-gpg-key-for-authenticated-user"]),
    (
        "which organizations am I a member of",
        &["orgs/list-for-authenticated-user", "orgs/list-memberships-for-authenticated-user"],
    ),
    ("invite someone to join our organization", &["orgs/create-invitation", "orgs/set-membership-for-user"]),
    ("accept an invitation to collaborate on a repo", &["repos/accept-invitation-for-authenticated-user"]),
    ("tag my repo with topics like rust and cli", &["repos/replace-all-topics"]),
    ("how many views did my repo get", &["repos/get-views"]),
    ("download the source of a repo as a zip", &["repos/download-zipball-archive"]),
    ("sync my fork with the upstream repo", &["repos/merge-upstream"]),
    ("merge one branch into another", &["repos/merge"]),
    ("attach a binary to a release", &["repos/upload-release-asset"]),
    ("take down a release I published by mistake", &["repos/delete-release"]),
    ("generate release notes automatically", &["repos/generate-release-notes"]),
    ("get the release for a tag", &["repos/get-release-by-tag"]),
    ("show the commit history of a branch", &["repos/list-commits"]),
    ("what milestones are planned for this repo", &["issues/list-milestones"]),
    ("show everything that happened on an issue", &["issues/list-events-for-timeline", "issues/list-events"]),
    ("add a sub-issue under a parent issue", &["issues/add-sub-issue"]),
    ("bring my PR branch up to date with the base branch", &["pulls/update-branch"]),
    ("dismiss a stale review on my PR", &["pulls/dismiss-review"]),
    ("reply to a review comment on a PR", &["pulls/create-reply-for-review-comment"]),
    ("edit a gist", &["gists/update"]),
    ("set an Actions variable for a repo", &["actions/create-repo-variable", "actions/update-repo-variable"]),
    ("which self-hosted runners does this repo have", &["actions/list-self-hosted-runners-for-repo"]),
    (
        "clear the Actions cache of a repo",
        &["actions/delete-actions-cache-by-key", "actions/delete-actions-cache-by-id"],
    ),
    ("pause a scheduled workflow so it stops running", &["actions/disable-workflow"]),
    ("delete an old workflow run", &["actions/delete-workflow-run"]),
    ("approve a deployment that is waiting for review", &["actions/review-pending-deployments-for-run"]),
    ("what packages has our org published", &["packages/list-packages-for-organization"]),
    (
        "delete a version of a package",
        &[
            "packages/delete-package-version-for-authenticated-user",
            "packages/delete-package-version-for-org",
            "packages/delete-package-version-for-user",
        ],
    ),
    (
        "spin up a codespace for a repo",
        &["codespaces/create-with-repo-for-authenticated-user", "codespaces/create-for-authenticated-user"],
    ),
    ("stop my codespace", &["codespaces/stop-for-authenticated-user"]),
    ("list the items on a project board", &["projects/list-items-for-org", "projects/list-items-for-user"]),
    ("what should my .gitignore contain for a Node project", &["gitignore/get-template"]),
    ("find users who live in Berlin", &["search/users"]),
    ("which pull request introduced this commit", &["repos/list-pull-requests-associated-with-commit"]),
    ("mark a deployment as successful", &["repos/create-deployment-status"]),
    ("what permission does a user have on my repo", &["repos/get-collaborator-permission-level"]),
    // Written in the third round too, after the first of them were tuned on, before any of their results were run.
    ("update my profile bio", &["users/update-authenticated"]),
    ("what IP addresses does GitHub use for webhooks", &["meta/get"]),
    ("list all the emoji GitHub supports", &["emojis/get"]),
    ("dismiss a dependabot alert", &["dependabot/update-alert"]),
    ("close a code scanning alert as a false positive", &["code-scanning/update-alert"]),
    ("upload SARIF results from my scanner", &["code-scanning/upload-sarif"]),
    (
        "get a token to register a self-hosted runner",
        &["actions/create-registration-token-for-repo", "actions/create-registration-token-for-org"],
    ),
    ("delete a secret from a repo's Actions", &["actions/delete-repo-secret"]),
    ("which repos can a team access", &["teams/list-repos-in-org", "teams/list-repos-legacy"]),
    ("report a check run result for a commit", &["checks/create"]),
    ("let people comment on a locked issue again", &["issues/unlock"]),
    ("remove myself as assignee from an issue", &["issues/remove-assignees"]),
    ("read the discussion on an issue", &["issues/list-comments"]),
    ("who reacted to an issue", &["reactions/list-for-issue"]),
    ("who has a Copilot seat in our org", &["copilot/list-copilot-seats"]),
    (
        "how much did our org spend on GitHub this month",
        &["billing/get-github-billing-usage-report-org", "billing/get-github-billing-usage-summary-report-org"],
    ),
    ("get a file's raw blob by its SHA", &["git/get-blob"]),
    ("create an annotated tag", &["git/create-tag"]),
    ("what's the community health of a repo", &["repos/get-community-profile-metrics"]),
    ("list the installations of my GitHub App", &["apps/list-installations"]),
    // Written in a fourth round (2026-12-03) as more tuned tasks, from areas the others did not
    // cover, before any of their results were run.
    ("restrict who can comment on my repo for a day", &["interactions/set-restrictions-for-repo"]),
    ("is there a security advisory for a package I depend on", &["security-advisories/list-global-advisories"]),
    (
        "privately report a vulnerability to a project's maintainers",
        &["security-advisories/create-private-vulnerability-report"],
    ),
    ("export an SBOM of a repository", &["dependency-graph/export-sbom"]),
    ("what dependencies changed between two commits", &["dependency-graph/diff-range"]),
    ("which websites send visitors to my repo", &["repos/get-top-referrers"]),
    ("how many times was my repo cloned", &["repos/get-clones"]),
    ("show the rulesets that protect a repo", &["repos/get-repo-rulesets"]),
    ("turn JIRA ticket numbers in commit messages into links", &["repos/create-autolink"]),
    ("create a staging environment for deployments", &["repos/create-or-update-environment"]),
    ("store a secret that only the production environment can read", &["actions/create-or-update-environment-secret"]),
    (
        "redeliver a webhook that failed",
        &["repos/redeliver-webhook-delivery", "orgs/redeliver-webhook-delivery", "apps/redeliver-webhook-delivery"],
    ),
    ("see the recent deliveries of a repo webhook", &["repos/list-webhook-deliveries"]),
    ("send a test ping to my webhook", &["repos/ping-webhook", "orgs/ping-webhook"]),
    (
        "what has a user been doing on GitHub lately",
        &["activity/list-public-events-for-user", "activity/list-events-for-authenticated-user"],
    ),
    ("recent activity in a repository", &["activity/list-repo-events", "repos/list-activities"]),
    ("list the outside collaborators of our org", &["orgs/list-outside-collaborators"]),
    ("give a team the security manager role", &["orgs/add-security-manager-team", "orgs/assign-team-to-org-role"]),
    ("what roles can be assigned in our organization", &["orgs/list-org-roles"]),
    ("add a webhook for the whole organization", &["orgs/create-webhook"]),
    ("migrate an organization's repositories to an archive", &["migrations/start-for-org"]),
    (
        "bring back a package I deleted",
        &[
            "packages/restore-package-for-authenticated-user",
            "packages/restore-package-for-org",
            "packages/restore-package-for-user",
        ],
    ),
    (
        "which machine types can I pick for a codespace",
        &["codespaces/repo-machines-for-authenticated-user", "codespaces/codespace-machines-for-authenticated-user"],
    ),
    ("add my twitter profile to my GitHub account", &["users/add-social-account-for-authenticated-user"]),
    ("add a key for signing commits over SSH", &["users/create-ssh-signing-key-for-authenticated-user"]),
    ("which codes of conduct can a repo adopt", &["codes-of-conduct/get-all-codes-of-conduct"]),
    ("rebuild the GitHub Pages site", &["repos/request-pages-build"]),
    ("is the custom domain of my Pages site set up right", &["repos/get-pages-health-check"]),
    ("turn on dependabot security alerts for a repo", &["repos/enable-vulnerability-alerts"]),
    ("list the directory tree of a commit", &["git/get-tree"]),
    ("revoke a leaked token", &["credentials/revoke"]),
    ("rerun all the checks on a commit", &["checks/rerequest-suite"]),
    ("pull requests waiting for my review", &["search/issues-and-pull-requests"]),
    ("make a repo private", &["repos/update"]),
    ("change the default branch of a repo", &["repos/update"]),
    ("rename a branch", &["repos/rename-branch"]),
    ("get the SHA of the latest commit on main", &["repos/get-branch", "git/get-ref", "repos/get-commit"]),
    ("how long did a workflow run take", &["actions/get-workflow-run-usage", "actions/get-workflow-run"]),
    ("list the secrets our org shares with its repos' Actions", &["actions/list-org-secrets"]),
    ("add a comment to a pull request", &["issues/create-comment", "pulls/create-review-comment"]),
    ("check whether a user is a member of an org", &["orgs/check-membership-for-user", "orgs/get-membership-for-user"]),
    ("set up a campaign to fix security alerts across our org", &["campaigns/create-campaign"]),
    (
        "how often does a user call our org's API",
        &["api-insights/get-summary-stats-by-user", "api-insights/get-user-stats"],
    ),
    // A fifth round (2026-12-03), everyday tasks written before any of their results were run;
    // none names an operation a held-out task names, so tuning on them cannot fit the held-out part.
    ("is this repo starred by me", &["activity/check-repo-is-starred-by-authenticated-user"]),
    ("how many stars does a repo have", &["activity/get-stargazer-count-for-repo", "repos/get"]),
    ("stop watching a repository", &["activity/delete-repo-subscription"]),
    ("which repos am I watching", &["activity/list-watched-repos-for-authenticated-user"]),
    ("mute a notification thread", &["activity/set-thread-subscription", "activity/delete-thread-subscription"]),
    ("mark one notification as read", &["activity/mark-thread-as-read"]),
    ("show the annotations of a failed check", &["checks/list-annotations"]),
    ("fork someone's gist", &["gists/fork"]),
    ("star a gist", &["gists/star"]),
    ("list the gists I starred", &["gists/list-starred"]),
    ("see an older version of a gist", &["gists/get-revision"]),
    ("move a branch to point at another commit", &["git/update-ref"]),
    ("find all branches whose names start with feature", &["git/list-matching-refs"]),
    ("mark an issue as blocked by another issue", &["issues/add-blocked-by-dependency"]),
    ("what is blocking this issue", &["issues/list-dependencies-blocked-by"]),
    ("who can be assigned issues in this repo", &["issues/list-assignees"]),
    ("rename a label", &["issues/update-label"]),
    ("delete a label from the repo", &["issues/delete-label"]),
    ("what labels are on this issue", &["issues/list-labels-on-issue"]),
    ("change the due date of a milestone", &["issues/update-milestone"]),
    ("pin a comment on an issue", &["issues/pin-comment"]),
    ("list the sub-issues of an issue", &["issues/list-sub-issues"]),
    ("find the parent of a sub-issue", &["issues/get-parent"]),
    ("replace all the labels on an issue", &["issues/set-labels"]),
    ("rename a pull request", &["pulls/update"]),
    ("throw away my pending review", &["pulls/delete-pending-review"]),
    ("edit a review comment I left on a PR", &["pulls/update-review-comment"]),
    ("who was asked to review this PR", &["pulls/list-requested-reviewers"]),
    ("un-request a reviewer from a pull request", &["pulls/remove-requested-reviewers"]),
    ("squash and merge a PR", &["pulls/merge"]),
    ("heart a release", &["reactions/create-for-release"]),
    ("remove my reaction from an issue", &["reactions/delete-for-issue"]),
    ("search labels in a repo", &["search/labels"]),
    ("find topics related to kubernetes", &["search/topics"]),
    ("grep the org's code for an API key", &["search/code"]),
    ("get a single comment on an issue", &["issues/get-comment"]),
    ("list every comment across a repo's issues", &["issues/list-comments-for-repo"]),
    ("create a commit through the API without cloning", &["git/create-commit"]),
    ("get info about a tag", &["git/get-tag"]),
    ("what repos has a user starred", &["activity/list-repos-starred-by-user"]),
    (
        "check if a user can be assigned to an issue",
        &["issues/check-user-can-be-assigned", "issues/check-user-can-be-assigned-to-issue"],
    ),
    // A sixth round (2026-12-03): 148 tasks written before any of their results were run, dealt
    // alternately into this part and the second held-out part; the two of these that named an
    // operation a held-out task names were left out.
    ("what comments are on this gist", &["gists/list-comments"]),
    ("show my gists", &["gists/list", "gists/list-for-user"]),
    ("what is the history of edits to a gist", &["gists/list-commits"]),
    ("store raw file contents as a git object", &["git/create-blob"]),
    ("list all the labels in a repo", &["issues/list-labels-for-repo"]),
    ("unpin a comment", &["issues/unpin-comment"]),
    ("which labels belong to a milestone", &["issues/list-labels-for-milestone"]),
    ("detach a sub-issue from its parent", &["issues/remove-sub-issue"]),
    ("stop an issue from being blocked by another", &["issues/remove-dependency-blocked-by"]),
    ("list every review comment in a repository", &["pulls/list-review-comments-for-repo"]),
    (
        "merge a pull request in the background and check on it later",
        &["pulls/merge-async", "pulls/get-merge-async-result"],
    ),
    ("edit the text of my review summary", &["pulls/update-review"]),
    ("bring a PR branch up to date with main", &["pulls/update-branch"]),
    ("react with a rocket to a comment on an issue", &["reactions/create-for-issue-comment"]),
    ("add an emoji to a PR review comment", &["reactions/create-for-pull-request-review-comment"]),
    ("require signed commits on a branch", &["repos/create-commit-signature-protection"]),
    (
        "which status checks must pass on a branch",
        &["repos/get-status-checks-protection", "repos/get-all-status-check-contexts"],
    ),
    ("say a deployment failed", &["repos/create-deployment-status"]),
    ("add a read-only deploy key to a repo", &["repos/create-deploy-key"]),
    ("invite someone to collaborate on a repo", &["repos/add-collaborator"]),
    ("is this user a collaborator", &["repos/check-collaborator"]),
    ("decline an invitation to a repository", &["repos/decline-invitation-for-authenticated-user"]),
    ("download a repo as a tarball", &["repos/download-tarball-archive"]),
    ("which files are most visited in a repo", &["repos/get-top-paths"]),
    ("who contributed the most lines of code", &["repos/get-contributors-stats", "repos/list-contributors"]),
    ("delete a file attached to a release", &["repos/delete-release-asset"]),
    ("list the teams with access to a repo", &["repos/list-teams"]),
    ("list comments on a commit", &["repos/list-comments-for-commit"]),
    ("change the URL a repo webhook posts to", &["repos/update-webhook", "repos/update-webhook-config-for-repo"]),
    ("show the GitHub Pages settings of a repo", &["repos/get-pages"]),
    ("when did Pages last build", &["repos/get-latest-pages-build", "repos/list-pages-builds"]),
    ("what rules apply to a branch", &["repos/get-branch-rules"]),
    ("are vulnerability alerts on for this repo", &["repos/check-vulnerability-alerts"]),
    ("remove someone from a team", &["teams/remove-membership-for-user-in-org"]),
    ("rename a team", &["teams/update-in-org"]),
    ("what sub-teams does a team have", &["teams/list-child-in-org"]),
    ("find a team by its slug", &["teams/get-by-name"]),
    ("list outstanding invitations to my org", &["orgs/list-pending-invitations"]),
    ("make my membership in an org public", &["orgs/set-public-membership-for-authenticated-user"]),
    ("change an organization's billing email", &["orgs/update"]),
    ("list the orgs a user belongs to", &["orgs/list-for-user"]),
    ("who have I blocked", &["users/list-blocked-by-authenticated-user"]),
    ("add an email address to my account", &["users/add-email-for-authenticated-user"]),
    ("remove one of my GPG keys", &["users/delete-gpg-key-for-authenticated-user"]),
    ("do I follow this person", &["users/check-person-is-followed-by-authenticated"]),
    ("look up a user by numeric id", &["users/get-by-id"]),
    ("delete a workflow run's logs", &["actions/delete-workflow-run-logs"]),
    ("list the Actions variables of a repository", &["actions/list-repo-variables"]),
    ("how much cache storage is a repo using", &["actions/get-actions-cache-usage"]),
    (
        "remove a self-hosted runner",
        &["actions/delete-self-hosted-runner-from-repo", "actions/delete-self-hosted-runner-from-org"],
    ),
    ("add an organization secret for actions", &["actions/create-or-update-org-secret"]),
    (
        "get the key to encrypt a repo secret with",
        &[
            "actions/get-repo-public-key",
            "dependabot/get-repo-public-key",
            "codespaces/get-repo-public-key",
            "agents/get-repo-public-key",
        ],
    ),
    ("close a secret scanning alert as a false positive", &["secret-scanning/update-alert"]),
    ("list code scanning analyses", &["code-scanning/list-recent-analyses"]),
    ("have Copilot suggest a fix for a code scanning alert", &["code-scanning/create-autofix"]),
    ("list my codespaces", &["codespaces/list-for-authenticated-user"]),
    ("start a stopped codespace", &["codespaces/start-for-authenticated-user"]),
    ("list the versions of an org package", &["packages/get-all-package-versions-for-package-owned-by-org"]),
    ("list the projects of an organization", &["projects/list-for-org"]),
    ("list the common open source licenses", &["licenses/get-all-commonly-used"]),
    ("get a random zen quote", &["meta/get-zen"]),
    ("get an app's installation on a repo", &["apps/get-repo-installation"]),
    ("get a token to act as an app installation", &["apps/create-installation-access-token"]),
    ("take away a user's Copilot seat", &["copilot/cancel-copilot-seat-assignment-for-users"]),
    ("remove interaction limits from an org", &["interactions/remove-restrictions-for-org"]),
    ("request a CVE for an advisory", &["security-advisories/create-repository-advisory-cve-request"]),
    ("list migrations for an org", &["migrations/list-for-org"]),
    ("list the check suites for a commit", &["checks/list-suites-for-ref"]),
    ("report the result of a check run", &["checks/update", "checks/create"]),
    ("what has an org done publicly lately", &["activity/list-public-org-events"]),
    ("mark all notifications in one repo as read", &["activity/mark-repo-notifications-as-read"]),
    (
        "list events a user has received",
        &["activity/list-received-events-for-user", "activity/list-received-public-events-for-user"],
    ),
    ("mark a notification thread as done", &["activity/mark-thread-as-done"]),
    // The seventh round (2026-12-06), written by a writer who had seen
    // neither these tasks nor the vocabulary, less the tasks naming an
    // operation a held-out task names or asked already.
    ("who am I logged in as with this token?", &["users/get-authenticated"]),
    ("show me all the branches on octocat/hello-world", &["repos/list-branches"]),
    (
        "CI run has been hanging for an hour, stop it",
        &["actions/cancel-workflow-run", "actions/force-cancel-workflow-run"],
    ),
    ("open a PR from feature/login into main", &["pulls/create"]),
    ("squash and land PR 512", &["pulls/merge", "pulls/merge-async"]),
    ("ping alice and the backend team to review my PR", &["pulls/request-reviewers"]),
    ("LGTM, approve the pull request", &["pulls/create-review", "pulls/submit-review"]),
    ("drop a comment on line 88 of the diff in my PR", &["pulls/create-review-comment", "pulls/create-review"]),
    ("file a bug: login page crashes on Safari", &["issues/create"]),
    ("close issue 17 as not planned", &["issues/update"]),
    ("reply on the issue saying this is fixed in v2.1", &["issues/create-comment"]),
    ("slap a good-first-issue label on ticket 230", &["issues/add-labels"]),
    ("all open issues tagged bug in rust-lang/rust", &["issues/list-for-repo", "search/issues-and-pull-requests"]),
    ("rename master to main", &["repos/rename-branch"]),
    ("diff between v1.2.0 and v1.3.0", &["repos/compare-commits-with-basehead", "repos/compare-commits"]),
    ("which PR brought in commit 3f9a2c1?", &["repos/list-pull-requests-associated-with-commit"]),
    ("commit a change to docs/setup.md straight through the API, no clone", &["repos/create-or-update-file-contents"]),
    ("cut release v2.0.0 from main", &["repos/create-release"]),
    ("what's the newest release of kubernetes/kubernetes", &["repos/get-latest-release"]),
    ("autogenerate a changelog from merged PRs since the last tag", &["repos/generate-release-notes"]),
    ("kick off the deploy workflow manually with env=staging", &["actions/create-workflow-dispatch"]),
    ("only retry the jobs that failed, not the whole pipeline", &["actions/re-run-workflow-failed-jobs"]),
    ("grab the logs for the job that blew up", &["actions/download-job-logs-for-workflow-run"]),
    ("download the coverage artifact from last night's build", &["actions/download-artifact"]),
    ("set an NPM_TOKEN secret on my repo for GitHub Actions", &["actions/create-or-update-repo-secret"]),
    ("add a DEPLOY_REGION variable that workflows in this repo can read", &["actions/create-repo-variable"]),
    ("which CI runs failed on main today?", &["actions/list-workflow-runs-for-repo", "actions/list-workflow-runs"]),
    ("how many stars does this repo have", &["activity/get-stargazer-count-for-repo", "repos/get"]),
    (
        "stop getting notifications from this noisy repo",
        &["activity/set-repo-subscription", "activity/delete-repo-subscription"],
    ),
    ("clear my notification inbox, mark everything read", &["activity/mark-notifications-as-read"]),
    ("make a secret gist out of this snippet", &["gists/create"]),
    ("remove bob from the org, he left the company", &["orgs/remove-member", "orgs/remove-membership-for-user"]),
    ("add my friend as a collaborator on my private repo", &["repos/add-collaborator"]),
    ("new milestone v3.0 due end of the month", &["issues/create-milestone"]),
    ("thumbs-up react to that issue comment", &["reactions/create-for-issue-comment"]),
    ("find Go repos about kubernetes operators with over 1k stars", &["search/repos"]),
    ("grep the whole org's code for calls to legacyAuth()", &["search/code"]),
    ("add a webhook to this repo that posts push events to our Slack bridge", &["repos/create-webhook"]),
    (
        "my repo webhook didn't fire, show recent deliveries and their response codes",
        &["repos/list-webhook-deliveries"],
    ),
    ("mark the production deploy as succeeded", &["repos/create-deployment-status"]),
    (
        "are all the checks green on this commit?",
        &["repos/get-combined-status-for-ref", "checks/list-for-ref", "checks/list-suites-for-ref"],
    ),
    ("add my laptop's SSH key to my GitHub account", &["users/create-public-ssh-key-for-authenticated-user"]),
    ("create a new private repo called dotfiles", &["repos/create-for-authenticated-user"]),
    ("delete the feature branch now that it's merged", &["git/delete-ref"]),
    ("edit my comment on the PR, fix a typo", &["issues/update-comment", "pulls/update-review-comment"]),
    ("that old changes-requested review is blocking the merge, throw it out", &["pulls/dismiss-review"]),
    ("my fork is 30 commits behind upstream, catch it up", &["repos/merge-upstream"]),
    ("any CodeQL findings still open in this repo?", &["code-scanning/list-alerts-for-repo"]),
    ("dismiss CodeQL alert #12 as a false positive", &["code-scanning/update-alert"]),
    ("upload my semgrep SARIF file so results show up in the security tab", &["code-scanning/upload-sarif"]),
    ("did secret scanning catch any leaked keys in this repo", &["secret-scanning/list-alerts-for-repo"]),
    ("vulnerable deps dependabot flagged in my repo", &["dependabot/list-alerts-for-repo"]),
    (
        "draft a private security advisory for the vuln we found in our library",
        &["security-advisories/create-repository-advisory"],
    ),
    (
        "give me the SBOM for this repo as SPDX json for the compliance folks",
        &[
            "dependency-graph/export-sbom",
            "dependency-graph/generate-sbom-report",
            "dependency-graph/fetch-sbom-report",
        ],
    ),
    ("what dependencies changed between these two commits", &["dependency-graph/diff-range"]),
    (
        "why can't I push to release/1.x? what rules are on it",
        &["repos/get-branch-rules", "repos/get-branch-protection"],
    ),
    ("org-wide ruleset that blocks force pushes to every default branch", &["repos/create-org-ruleset"]),
    ("set up a production environment that needs a reviewer before deploys", &["repos/create-or-update-environment"]),
    ("add a secret only the staging environment can use", &["actions/create-or-update-environment-secret"]),
    ("approve the deploy that's waiting on prod for run 123", &["actions/review-pending-deployments-for-run"]),
    ("turn on GitHub Pages from the /docs folder", &["repos/create-pages-site"]),
    ("prune old container image versions from our org's ghcr package", &["packages/delete-package-version-for-org"]),
    (
        "I want to hack on this repo in the browser, spin up a codespace",
        &["codespaces/create-with-repo-for-authenticated-user", "codespaces/create-for-authenticated-user"],
    ),
    ("who in the org has a Copilot seat", &["copilot/list-copilot-seats"]),
    (
        "how much has our org spent on Actions minutes this month",
        &["billing/get-github-billing-usage-report-org", "billing/get-github-billing-usage-summary-report-org"],
    ),
    ("how many API calls do I have left before I get throttled", &["rate-limit/get"]),
    ("how many people cloned my repo in the last two weeks", &["repos/get-clones"]),
    ("export all our org's repos as a migration archive", &["migrations/start-for-org"]),
    (
        "limit interactions on my repo to existing contributors for 24h, we're getting brigaded",
        &["interactions/set-restrictions-for-repo"],
    ),
    ("mint an installation token for my GitHub App", &["apps/create-installation-access-token"]),
    (
        "customize the OIDC sub claim our workflows send to AWS for this repo",
        &["actions/set-custom-oidc-sub-claim-for-repo"],
    ),
    ("make JIRA-123 in commits auto-link to our Jira", &["repos/create-autolink"]),
    ("who force-pushed to main last week?", &["repos/list-activities"]),
    ("create an annotated tag for v1.0", &["git/create-tag", "git/create-ref"]),
    ("what license is this repo under", &["licenses/get-for-repo"]),
    ("Contributor Covenant text to drop into my repo", &["codes-of-conduct/get-conduct-code"]),
    ("need a .gitignore for a Node project", &["gitignore/get-template"]),
    ("list of emoji shortcodes GitHub supports", &["emojis/get"]),
    ("GitHub's IP ranges for webhooks and actions so I can allowlist them", &["meta/get"]),
    ("what has octocat been up to lately", &["activity/list-public-events-for-user"]),
    // The eighth round (2026-12-06), by another such writer; it chose how
    // much of a description is indexed, nothing else.
    ("whose account does this token belong to", &["users/get-authenticated"]),
    ("look up someone's GitHub profile by username", &["users/get-by-username"]),
    ("create a new private repo under my account", &["repos/create-for-authenticated-user"]),
    ("fork a project into my own account", &["repos/create-fork"]),
    ("archive an old repo nobody uses anymore", &["repos/update"]),
    ("file a bug report on a repo", &["issues/create"]),
    ("assign an issue to a teammate", &["issues/add-assignees", "issues/update"]),
    ("show the open PRs in this repo", &["pulls/list"]),
    ("open a PR from my feature branch into main", &["pulls/create"]),
    ("merge my approved PR", &["pulls/merge", "pulls/merge-async"]),
    ("approve someone's pull request", &["pulls/create-review", "pulls/submit-review"]),
    ("ask two people to look over my PR", &["pulls/request-reviewers"]),
    ("start a new branch off main", &["git/create-ref"]),
    ("get rid of a branch after it's merged", &["git/delete-ref"]),
    ("what's different between my branch and main?", &["repos/compare-commits", "repos/compare-commits-with-basehead"]),
    ("push a change to one file without cloning", &["repos/create-or-update-file-contents"]),
    ("cut a new release for v2.0", &["repos/create-release"]),
    ("what's the newest release of this project?", &["repos/get-latest-release"]),
    (
        "get the logs from a failed CI run",
        &[
            "actions/download-workflow-run-logs",
            "actions/download-workflow-run-attempt-logs",
            "actions/download-job-logs-for-workflow-run",
        ],
    ),
    ("rerun only the jobs that failed", &["actions/re-run-workflow-failed-jobs"]),
    ("stop a workflow run that's stuck", &["actions/cancel-workflow-run", "actions/force-cancel-workflow-run"]),
    ("kick off a workflow by hand with some inputs", &["actions/create-workflow-dispatch"]),
    ("recent Actions runs in my repo", &["actions/list-workflow-runs-for-repo"]),
    ("download the build output a CI run uploaded", &["actions/download-artifact"]),
    ("store an API token as a secret for my repo's workflows", &["actions/create-or-update-repo-secret"]),
    ("give this repo a star", &["activity/star-repo-for-authenticated-user"]),
    ("stop watching a noisy repo", &["activity/delete-repo-subscription"]),
    ("check my unread notifications", &["activity/list-notifications-for-authenticated-user"]),
    ("who's in our organization", &["orgs/list-members"]),
    (
        "add a coworker to a team",
        &[
            "teams/add-or-update-membership-for-user-in-org",
            "teams/add-or-update-membership-for-user-legacy",
            "teams/add-member-legacy",
        ],
    ),
    ("give a contractor write access to my repo", &["repos/add-collaborator"]),
    ("put some labels on an issue", &["issues/add-labels", "issues/set-labels", "issues/update"]),
    ("set up a milestone for the next sprint", &["issues/create-milestone"]),
    ("thumbs up a comment on an issue", &["reactions/create-for-issue-comment"]),
    ("find repos about rust web frameworks", &["search/repos"]),
    ("notify my server whenever someone pushes to the repo", &["repos/create-webhook"]),
    (
        "resend a webhook delivery that failed",
        &["repos/redeliver-webhook-delivery", "orgs/redeliver-webhook-delivery", "apps/redeliver-webhook-delivery"],
    ),
    ("deploy a commit to production", &["repos/create-deployment"]),
    (
        "are the checks green on this commit?",
        &[
            "repos/get-combined-status-for-ref",
            "repos/list-commit-statuses-for-ref",
            "checks/list-for-ref",
            "checks/list-suites-for-ref",
        ],
    ),
    ("add my laptop's SSH key to my account", &["users/create-public-ssh-key-for-authenticated-user"]),
    ("any open code scanning alerts in my repo?", &["code-scanning/list-alerts-for-repo"]),
    ("dismiss a CodeQL alert as a false positive", &["code-scanning/update-alert"]),
    ("has anyone leaked credentials across our org?", &["secret-scanning/list-alerts-for-org"]),
    ("show the Dependabot alerts for a repo", &["dependabot/list-alerts-for-repo"]),
    (
        "export an SBOM for my repository",
        &[
            "dependency-graph/export-sbom",
            "dependency-graph/generate-sbom-report",
            "dependency-graph/fetch-sbom-report",
        ],
    ),
    ("privately draft a security advisory for my project", &["security-advisories/create-repository-advisory"]),
    ("look up a CVE in the GitHub advisory database", &["security-advisories/list-global-advisories"]),
    ("require sign-off before deploying to the production environment", &["repos/create-or-update-environment"]),
    ("host a static site from my repo with Pages", &["repos/create-pages-site"]),
    (
        "delete an old version of a container image",
        &[
            "packages/delete-package-version-for-authenticated-user",
            "packages/delete-package-version-for-org",
            "packages/delete-package-version-for-user",
        ],
    ),
    ("who has a Copilot seat in our org?", &["copilot/list-copilot-seats"]),
    (
        "how much has our org spent on Actions this month",
        &["billing/get-github-billing-usage-report-org", "billing/get-github-billing-usage-summary-report-org"],
    ),
    ("which sites send visitors to my repo", &["repos/get-top-referrers"]),
    ("export all our org's repos to an archive", &["migrations/start-for-org"]),
    ("only let collaborators comment on my repo for the next 24 hours", &["interactions/set-restrictions-for-repo"]),
    ("get an access token for my GitHub App installation", &["apps/create-installation-access-token"]),
    (
        "customize the sub claim in Actions OIDC tokens",
        &["actions/set-custom-oidc-sub-claim-for-repo", "oidc/update-oidc-custom-sub-template-for-org"],
    ),
    ("turn TICKET-123 references into links to our tracker", &["repos/create-autolink"]),
    ("get the whole file tree of a repo in one call", &["git/get-tree"]),
    ("what license is this repo under?", &["licenses/get-for-repo"]),
    ("gitignore template for Node", &["gitignore/get-template"]),
    ("which codes of conduct can I pick from", &["codes-of-conduct/get-all-codes-of-conduct"]),
    ("turn markdown into HTML", &["markdown/render", "markdown/render-raw"]),
    ("GitHub IP ranges for our firewall allowlist", &["meta/get"]),
    ("what has this user been doing publicly lately", &["activity/list-public-events-for-user"]),
];

const GITHUB_HELD_OUT: Tasks = &[
    ("show one pull request by its number", &["pulls/get"]),
    ("list the comments on a pull request", &["pulls/list-review-comments", "issues/list-comments"]),
    ("delete a release", &["repos/delete-release"]),
    ("edit the notes of a release", &["repos/update-release"]),
    ("list the files attached to a release", &["repos/list-release-assets"]),
    ("upload a binary to a release", &["repos/upload-release-asset"]),
    ("list issues assigned to me", &["issues/list", "issues/list-for-authenticated-user"]),
    ("look at issue number 42", &["issues/get"]),
    ("what happened on this issue", &["issues/list-events", "issues/list-events-for-timeline"]),
    ("clear every label from an issue", &["issues/remove-all-labels"]),
    ("make a new label for a repo", &["issues/create-label"]),
    ("delete a milestone", &["issues/delete-milestone"]),
    ("which organizations am I in", &["orgs/list-for-authenticated-user"]),
    ("show info about an org", &["orgs/get"]),
    ("invite someone to join an org", &["orgs/create-invitation", "orgs/set-membership-for-user"]),
    ("list the repositories of an org", &["repos/list-for-org"]),
    ("list a user's public repos", &["repos/list-for-user"]),
    ("who do I follow", &["users/list-followed-by-authenticated-user"]),
    ("who follows me", &["users/list-followers-for-authenticated-user"]),
    ("unfollow someone", &["users/unfollow"]),
    ("update my profile bio", &["users/update-authenticated"]),
    ("list what is in a folder of a repo", &["repos/get-content"]),
    ("delete a file from a repo", &["repos/delete-file"]),
    ("download a repo as a zip", &["repos/download-zipball-archive"]),
    ("list the commits on a branch", &["repos/list-commits"]),
    ("leave a comment on a commit", &["repos/create-commit-comment"]),
    ("mark a commit as passing", &["repos/create-commit-status"]),
    ("list the webhooks of a repo", &["repos/list-webhooks"]),
    ("delete a webhook", &["repos/delete-webhook"]),
    ("list the self-hosted runners of a repo", &["actions/list-self-hosted-runners-for-repo"]),
    ("list the secrets of a repo's actions", &["actions/list-repo-secrets"]),
    ("delete a CI run", &["actions/delete-workflow-run"]),
    ("turn off a workflow", &["actions/disable-workflow"]),
    (
        "list the artifacts a build produced",
        &["actions/list-workflow-run-artifacts", "actions/list-artifacts-for-repo"],
    ),
    ("reply to a gist", &["gists/create-comment"]),
    ("delete a gist", &["gists/delete"]),
    ("search for users named alice", &["search/users"]),
    ("find commits by their message", &["search/commits"]),
    ("list the members of a team", &["teams/list-members-in-org"]),
    ("create a team in an org", &["teams/create"]),
];

/// The second held-out part (2026-12-03): the other half of the sixth round's
/// tasks, never tuned on.
const GITHUB_HELD_OUT_SECOND: Tasks = &[
    ("take my star off a gist", &["gists/unstar"]),
    ("list public gists people posted recently", &["gists/list-public"]),
    ("who forked my gist", &["gists/list-forks"]),
    ("leave a comment on a gist", &["gists/create-comment"]),
    ("build a new tree for a commit", &["git/create-tree"]),
    ("unlock the conversation on an issue", &["issues/unlock"]),
    ("what happened to this issue over time", &["issues/list-events-for-timeline", "issues/list-events"]),
    ("list issues in an organization", &["issues/list-for-org"]),
    ("show a milestone's progress", &["issues/get-milestone"]),
    ("change the order of sub-issues", &["issues/reprioritize-sub-issue"]),
    ("which issues does this issue block", &["issues/list-dependencies-blocking"]),
    ("delete a comment I made on a PR diff", &["pulls/delete-review-comment"]),
    ("what did a specific review say", &["pulls/get-review"]),
    ("which comments belong to one review", &["pulls/list-comments-for-review"]),
    ("show the diff of a pull request", &["pulls/list-files", "pulls/get"]),
    ("list reactions on a commit comment", &["reactions/list-for-commit-comment"]),
    ("who reacted to a release", &["reactions/list-for-release"]),
    ("remove protection from a branch", &["repos/delete-branch-protection"]),
    (
        "require reviews before merging into a branch",
        &["repos/update-pull-request-review-protection", "repos/update-branch-protection"],
    ),
    ("list the deployments of a repo", &["repos/list-deployments"]),
    ("remove a deployment environment from a repo", &["repos/delete-an-environment"]),
    ("remove a deploy key", &["repos/delete-deploy-key"]),
    ("kick a collaborator out of a repository", &["repos/remove-collaborator"]),
    ("list pending invitations to a repo", &["repos/list-invitations"]),
    ("what repository invitations do I have", &["repos/list-invitations-for-authenticated-user"]),
    ("what topics does this repo have", &["repos/get-all-topics"]),
    (
        "how many commits per week were made in the last year",
        &["repos/get-commit-activity-stats", "repos/get-participation-stats"],
    ),
    ("edit a release's notes", &["repos/update-release"]),
    ("get a specific release", &["repos/get-release", "repos/get-release-by-tag"]),
    ("get the README from a subfolder", &["repos/get-readme-in-directory"]),
    ("which branches contain this commit", &["repos/list-branches-for-head-commit"]),
    ("send a test push event to a webhook", &["repos/test-push-webhook"]),
    ("turn off GitHub Pages for a repo", &["repos/delete-pages-site"]),
    ("set up a ruleset for a repository", &["repos/create-repo-ruleset"]),
    ("enable Dependabot security updates on a repo", &["repos/enable-automated-security-fixes"]),
    ("list the public repositories on GitHub", &["repos/list-public"]),
    ("give a team write access to a repo", &["teams/add-or-update-repo-permissions-in-org"]),
    ("which teams am I on", &["teams/list-for-authenticated-user"]),
    ("disband a team", &["teams/delete-in-org"]),
    ("ban someone from an organization", &["orgs/block-user"]),
    ("cancel an org invitation", &["orgs/cancel-invitation"]),
    ("list an org's webhooks", &["orgs/list-webhooks"]),
    ("accept an invitation to join an org", &["orgs/update-membership-for-authenticated-user"]),
    ("list all organizations on GitHub", &["orgs/list"]),
    ("let a blocked user interact with me again", &["users/unblock"]),
    ("list my SSH keys", &["users/list-public-ssh-keys-for-authenticated-user"]),
    ("does this user follow another user", &["users/check-following-for-user"]),
    ("show someone's public SSH keys", &["users/list-public-keys-for-user"]),
    ("approve a workflow run from a fork contributor", &["actions/approve-workflow-run"]),
    ("turn a workflow back on", &["actions/enable-workflow"]),
    ("throw away an artifact from a run", &["actions/delete-artifact"]),
    ("list the caches of a repo", &["actions/get-actions-cache-list"]),
    ("get the details of one job in a run", &["actions/get-job-for-workflow-run"]),
    (
        "which repositories can use an org secret",
        &[
            "actions/list-selected-repos-for-org-secret",
            "dependabot/list-selected-repos-for-org-secret",
            "codespaces/list-selected-repos-for-org-secret",
            "agents/list-selected-repos-for-org-secret",
        ],
    ),
    ("list Dependabot alerts across an org", &["dependabot/list-alerts-for-org"]),
    ("where was a leaked secret found", &["secret-scanning/list-locations-for-alert"]),
    ("get the CodeQL setup of a repo", &["code-scanning/get-default-setup"]),
    ("list CodeQL databases", &["code-scanning/list-codeql-databases"]),
    ("get rid of a codespace", &["codespaces/delete-for-authenticated-user"]),
    ("delete a package from my account", &["packages/delete-package-for-authenticated-user"]),
    ("add an issue to a project", &["projects/add-item-for-org", "projects/add-item-for-user"]),
    ("get a license by its key", &["licenses/get"]),
    ("list gitignore templates", &["gitignore/get-all-templates"]),
    ("list the GitHub Apps installed in an org", &["orgs/list-app-installations"]),
    ("which repos can my installation reach", &["apps/list-repos-accessible-to-installation"]),
    ("check whether an OAuth token is still valid", &["apps/check-token"]),
    ("give Copilot seats to some users", &["copilot/add-copilot-seats-for-users"]),
    ("list the security advisories of a repository", &["security-advisories/list-repository-advisories"]),
    ("get a global security advisory by its GHSA id", &["security-advisories/get-global-advisory"]),
    ("re-run a check run", &["checks/rerequest-run"]),
    ("get one check run", &["checks/get"]),
    ("list public events across GitHub", &["activity/list-public-events"]),
    ("which users watch a repo", &["activity/list-watchers-for-repo"]),
    ("get my feed URLs", &["activity/get-feeds"]),
    ("am I subscribed to this repo", &["activity/get-repo-subscription"]),
];

const DIRECTUS_TUNED: Tasks = &[
    ("sign in with email and password", &["login"]),
    ("get a new access token with my refresh token", &["refresh"]),
    ("sign out", &["logout"]),
    ("I forgot my password", &["passwordRequest"]),
    ("list the records in a collection", &["getItems"]),
    ("add a new record to a collection", &["createItem"]),
    ("change one item", &["updateItem"]),
    ("remove an item from a collection", &["deleteItem"]),
    ("upload a file", &["createFile"]),
    ("who am I", &["getMe"]),
    ("invite someone by email", &["invite"]),
    ("list all roles", &["getRoles"]),
    ("create a table", &["createCollection"]),
    ("add a column to a collection", &["createField"]),
    ("what changed recently", &["getActivities", "getRevisions"]),
    ("create a folder for files", &["createFolder"]),
    ("is the server up", &["ping", "serverInfo"]),
    ("turn on two-factor authentication", &["meTfaEnable"]),
    ("export items to CSV", &["export"]),
    ("list all users", &["getUsers"]),
    // Written as held out; seen while tuning began, so tuned on since.
    ("log in", &["login"]),
    ("set a new password with the reset token", &["passwordReset"]),
    ("fetch a single record by id", &["getItem"]),
    ("delete many items at once", &["deleteItems"]),
    ("rename a file", &["updateFile"]),
    ("download an image thumbnail", &["getAsset"]),
    ("update my profile", &["updateMe"]),
    ("create a new user account", &["createUser", "registerUser"]),
    ("what permissions do I have", &["getMyPermissions"]),
    ("list the fields of a collection", &["getCollectionFields"]),
    ("leave a comment on an item", &["createComment"]),
    ("show the history of changes to an item", &["getRevisions"]),
    ("create an automation", &["createFlow"]),
    ("import data from a file", &["import", "importBatch"]),
    ("clear the cache", &["clear-cache"]),
    ("back up the data model", &["schemaSnapshot"]),
    // Written in the third round (2026-12-02) as more tuned tasks, before any of their results were run.
    ("can I log in with Google or GitHub", &["oauth", "oauthProvider"]),
    ("accept the invitation I got by email", &["acceptInvite"]),
    ("drop a table", &["deleteCollection"]),
    ("link two collections with a relationship", &["createRelation"]),
    ("change the project settings", &["updateSetting"]),
    ("save my current filters as a bookmark", &["createPreset"]),
    ("reorder the items in a collection", &["sort"]),
    ("what extensions are installed", &["listExtensions"]),
    ("make a draft of an item without publishing it", &["createContentVersion", "saveContentVersion"]),
    ("publish the draft version of an item", &["promoteContentVersion"]),
    ("apply schema changes from staging", &["schemaApply"]),
    ("disable two factor for a user who lost their phone", &["disableUserTfa"]),
];

const DIRECTUS_HELD_OUT: Tasks = &[
    ("list all collections", &["getCollections"]),
    ("delete a collection", &["deleteCollection"]),
    ("change the type of a field", &["updateField"]),
    ("remove a field from a collection", &["deleteField"]),
    ("delete a user", &["deleteUser"]),
    ("change a user's role", &["updateUser"]),
    ("create a role", &["createRole"]),
    ("allow a role to read a collection", &["createPermission"]),
    ("delete a folder", &["deleteFolder"]),
    ("get the project settings", &["getSettings"]),
    ("accept an invitation", &["acceptInvite"]),
    ("turn off two-factor login", &["meTfaDisable", "disableUserTfa"]),
    ("list the saved bookmarks", &["getPresets"]),
    ("reorder the items of a collection", &["sort"]),
    ("generate a random string", &["random"]),
    ("list the relations between collections", &["getRelations"]),
];

/// Where a task's first right answer came, among the first [`DEPTH`].
const DEPTH: usize = 100;

/// recall@1, recall@5 and MRR over tasks, from each task's rank (1-based).
#[derive(Debug, Clone, Copy)]
struct Figures {
    at1: f64,
    at5: f64,
    mrr: f64,
}

impl Figures {
    fn of(ranks: &[Option<usize>]) -> Self {
        let n = ranks.len() as f64;
        let share = |within: usize| ranks.iter().filter(|r| r.is_some_and(|r| r <= within)).count() as f64 / n;
        let mrr = ranks.iter().map(|r| r.map_or(0.0, |r| 1.0 / r as f64)).sum::<f64>() / n;
        Self { at1: share(1), at5: share(5), mrr }
    }
}

/// One operation of the document, as the baseline reads it.
struct Operation {
    id: String,
    text: String,
}

/// The operations of an OpenAPI document with the text a plain ranking has:
/// operation id, path, tags, summary, the first lines of the description.
fn operations(document: &Value) -> Vec<Operation> {
    let mut out = Vec::new();
    let paths = document["paths"].as_object().expect("an OpenAPI document has paths");
    for (path, item) in paths {
        for (method, operation) in item.as_object().into_iter().flatten() {
            let Some(id) = operation.get("operationId").and_then(Value::as_str) else { continue };
            if !["get", "put", "post", "delete", "patch", "head", "options"].contains(&method.as_str()) {
                continue;
            }
            let text = |key: &str| operation.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
            let tags: Vec<&str> =
                operation["tags"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let description: String = text("description").chars().take(400).collect();
            let text = [id, path, &tags.join(" "), &text("summary"), &description].join(" ");
            out.push(Operation { id: id.to_owned(), text });
        }
    }
    out
}

/// Lower-case words split at non-alphanumerics and camelCase humps, of two
/// letters or more: what the ranking before this one indexed, unstemmed.
fn plain_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        }
    }
    out.push(current);
    out.retain(|w| w.chars().count() > 1);
    out
}

/// Plain BM25 (k1 = 1.2, b = 0.75) over each operation's text as one field:
/// the baseline.
struct Bm25<'o> {
    operations: &'o [Operation],
    documents: Vec<Vec<String>>,
    average: f64,
}

impl<'o> Bm25<'o> {
    fn new(operations: &'o [Operation]) -> Self {
        let documents: Vec<Vec<String>> = operations.iter().map(|o| plain_words(&o.text)).collect();
        let average = documents.iter().map(Vec::len).sum::<usize>() as f64 / documents.len() as f64;
        Self { operations, documents, average }
    }

    /// Operation ids in rank order.
    fn rank(&self, query: &str) -> Vec<String> {
        let n = self.documents.len() as f64;
        let mut terms = plain_words(query);
        terms.sort();
        terms.dedup();
        let idf: Vec<f64> = terms
            .iter()
            .map(|term| {
                let df = self.documents.iter().filter(|d| d.contains(term)).count() as f64;
                ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
            })
            .collect();
        let mut scored: Vec<(f64, &str)> = self
            .documents
            .iter()
            .zip(self.operations)
            .map(|(words, operation)| {
                let length = 0.25 + 0.75 * words.len() as f64 / self.average;
                let score = terms
                    .iter()
                    .zip(&idf)
                    .map(|(term, idf)| {
                        let tf = words.iter().filter(|w| *w == term).count() as f64;
                        idf * tf * 2.2 / (tf + 1.2 * length)
                    })
                    .sum();
                (score, operation.id.as_str())
            })
            .filter(|(score, _)| *score > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        scored.into_iter().map(|(_, id)| id.to_owned()).collect()
    }
}

/// The rank of the first of `expected` in `ranked`, within [`DEPTH`].
fn rank(ranked: &[String], expected: &[&str]) -> Option<usize> {
    ranked.iter().take(DEPTH).position(|r| expected.contains(&r.as_str())).map(|at| at + 1)
}

/// A catalog of `document` alone, under `namespace`; `more` is TOML for
/// the source (its `policy`) and after it (`[[toolkits]]`).
async fn catalog(document: &Published, namespace: &str, more: &str) -> (Catalog, CatalogConfig) {
    let spec = document.path();
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[sources]]\nnamespace = \"{namespace}\"\nkind = \"openapi\"\nspec = {spec:?}\nbase_url = \
         \"https://{namespace}.example.invalid\"\n{more}"
    );
    let config = CatalogConfig::from_toml_str(&toml, &dir.path().join("executor.toml")).unwrap();
    let catalog = Catalog::connect(&config).await.unwrap();
    assert_eq!(catalog.namespaces()[0].error, None);
    (catalog, config)
}

async fn search(catalog: &Catalog, request: Value) -> Vec<Value> {
    let found = catalog.search(request).await.unwrap();
    found["items"].as_array().unwrap().clone()
}

/// Every tool's path by its operation id (a path ends in the id, made an identifier).
async fn paths_by_id(catalog: &Catalog, operations: &[Operation]) -> HashMap<String, String> {
    let mut paths = Vec::new();
    loop {
        let page = search(catalog, json!({"query": "", "limit": 100, "offset": paths.len()})).await;
        if page.is_empty() {
            break;
        }
        paths.extend(page.into_iter().map(|item| item["path"].as_str().unwrap().to_owned()));
    }
    let identifier = |id: &str| -> String {
        let mapped: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '$' { c } else { '_' }).collect();
        mapped.trim_matches('_').to_owned()
    };
    operations
        .iter()
        .map(|operation| {
            let name = identifier(&operation.id);
            let matching: Vec<&String> = paths.iter().filter(|p| p.rsplit('.').next() == Some(&name)).collect();
            assert_eq!(matching.len(), 1, "operation {} is tool {matching:?}", operation.id);
            (operation.id.clone(), matching[0].clone())
        })
        .collect()
}

struct Evaluation {
    name: &'static str,
    tools: usize,
    /// Per row (tuned, each held-out part, the held-out parts together but
    /// for the tasks also in the tuned part, then all): its tasks, ours and
    /// the baseline's figures.
    rows: Vec<(&'static str, usize, Figures, Figures)>,
}

impl Evaluation {
    fn row(&self, name: &str) -> Figures {
        self.rows.iter().find(|(row, ..)| *row == name).map(|(_, _, ours, _)| *ours).unwrap()
    }
}

/// The held-out figures to believe: every held-out part together, without a
/// task also asked word for word in the tuned part (two were, in the third round).
const UNSEEN: &str = "held out, not in the tuned part";

async fn evaluate(
    document: &Published,
    namespace: &'static str,
    tuned: Tasks,
    held_out: &[(&'static str, Tasks)],
) -> Evaluation {
    let text = std::fs::read_to_string(document.path()).unwrap();
    let operations = operations(&serde_json::from_str(&text).unwrap());
    let (catalog, _) = catalog(document, namespace, "").await;
    let paths = paths_by_id(&catalog, &operations).await;
    let baseline = Bm25::new(&operations);
    let ids_by_path: HashMap<&str, &str> = paths.iter().map(|(id, path)| (path.as_str(), id.as_str())).collect();
    let mut rows = Vec::new();
    let (mut ours_all, mut plain_all) = (Vec::new(), Vec::new());
    let (mut ours_unseen, mut plain_unseen) = (Vec::new(), Vec::new());
    let asked: Vec<&str> = tuned.iter().map(|(query, _)| *query).collect();
    for (part, tasks) in std::iter::once(&("tuned", tuned)).chain(held_out) {
        let (mut ours, mut plain) = (Vec::new(), Vec::new());
        for (query, expected) in *tasks {
            for id in *expected {
                assert!(paths.contains_key(*id), "{namespace}: no operation {id}");
            }
            let found = search(&catalog, json!({"query": query, "limit": DEPTH})).await;
            let ranked: Vec<String> =
                found.iter().map(|item| ids_by_path[item["path"].as_str().unwrap()].to_owned()).collect();
            let (r, b) = (rank(&ranked, expected), rank(&baseline.rank(query), expected));
            // Only the tuned part's misses are shown: the held-out parts stay unseen while tuning.
            if r != Some(1) && *part == "tuned" {
                println!(
                    "  {namespace} {part}: {query:?} expected {expected:?} at {r:?} (BM25 {b:?}); top 3: {:?}",
                    &ranked[..ranked.len().min(3)]
                );
            }
            if *part != "tuned" && !asked.contains(query) {
                ours_unseen.push(r);
                plain_unseen.push(b);
            }
            ours.push(r);
            plain.push(b);
        }
        rows.push((*part, tasks.len(), Figures::of(&ours), Figures::of(&plain)));
        ours_all.extend(ours);
        plain_all.extend(plain);
    }
    rows.push((UNSEEN, ours_unseen.len(), Figures::of(&ours_unseen), Figures::of(&plain_unseen)));
    rows.push(("all", ours_all.len(), Figures::of(&ours_all), Figures::of(&plain_all)));
    Evaluation { name: namespace, tools: operations.len(), rows }
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_find_their_operations_in_published_documents() {
    // While tuning, `DISCOVERY_TUNED_ONLY=1` runs the tuned part alone: the
    // held-out parts are not searched, and no figure of them is computed or shown.
    let tuning = std::env::var_os("DISCOVERY_TUNED_ONLY").is_some();
    let held_out = |parts| if tuning { &[][..] } else { parts };
    let github = evaluate(
        &GITHUB,
        "github",
        GITHUB_TUNED,
        held_out(&[("held out", GITHUB_HELD_OUT), ("held out, second", GITHUB_HELD_OUT_SECOND)]),
    )
    .await;
    let directus = evaluate(&DIRECTUS, "directus", DIRECTUS_TUNED, held_out(&[("held out", DIRECTUS_HELD_OUT)])).await;
    println!("| document | tasks | search: recall@1 | recall@5 | MRR | BM25: recall@1 | recall@5 | MRR |");
    println!("|---|---|---|---|---|---|---|---|");
    for evaluation in [&github, &directus] {
        for (part, n, ours, plain) in evaluation.rows.iter().filter(|(_, n, _, _)| *n > 0) {
            println!(
                "| {} ({} tools), {part} | {n} | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} | {:.3} |",
                evaluation.name, evaluation.tools, ours.at1, ours.at5, ours.mrr, plain.at1, plain.at5, plain.mrr
            );
        }
    }
    // The issue's bar on GitHub's held-out part: recall@5 0.9 and recall@1
    // 0.7 (docs/benchmarks.md, "Discovery").
    if tuning {
        return;
    }
    let unseen = github.row(UNSEEN);
    assert!(unseen.at5 >= 0.9 && unseen.at1 >= 0.7, "GitHub, {UNSEEN}: {unseen:?}");
    for evaluation in [&github, &directus] {
        let (_, _, ours, plain) = *evaluation.rows.last().unwrap();
        assert!(ours.mrr > plain.mrr && ours.at5 >= plain.at5, "{}: {ours:?} against BM25 {plain:?}", evaluation.name);
    }
}

/// The item of `path` among what `query` finds, in `tools`' search.
async fn item(tools: &dyn Tools, query: &str, path: &str) -> Value {
    let found = tools.search(json!({"query": query, "limit": 100})).await.unwrap();
    let items = found["items"].as_array().unwrap();
    items.iter().find(|item| item["path"] == path).unwrap_or_else(|| panic!("{query}: no {path}")).clone()
}

/// Each item says what it is and what a call would do, as the policy
/// decides for this endpoint before any argument is known.
#[tokio::test(flavor = "multi_thread")]
async fn items_say_whether_a_call_reads_and_what_the_policy_would_do() {
    let more = r#"policy = { rules = [
  { pattern = "github.repos.repos_delete", action = "block" },
  { pattern = "github.issues.*", action = "run" },
] }

[[toolkits]]
name = "triage"
tools = ["github.issues.*", "github.repos.*"]
policy = { rules = [{ pattern = "github.issues.issues_list_for_repo", action = "approve" }] }
"#;
    let (catalog, config) = catalog(&GITHUB, "github", more).await;
    let catalog = std::sync::Arc::new(catalog);
    let table = [
        ("open a pull request", "github.pulls.pulls_create", "Create a pull request", "write", "approve"),
        ("list pull requests", "github.pulls.pulls_list", "List pull requests", "read", "run"),
        ("delete a repository", "github.repos.repos_delete", "Delete a repository", "write", "block"),
        ("create an issue", "github.issues.issues_create", "Create an issue", "write", "run"),
        ("list the issues of a repo", "github.issues.issues_list_for_repo", "List repository issues", "read", "run"),
    ];
    for (query, path, description, kind, approval) in table {
        let expected = json!({
            "path": path, "description": description, "namespace": "github", "kind": kind, "approval": approval,
        });
        assert_eq!(item(&*catalog, query, path).await, expected, "{query}");
    }
    // A toolkit tightens what its source would do, never loosens it.
    let view = Catalog::toolkit_views(&catalog, &config.toolkits).pop().unwrap();
    let listed = item(&view, "list the issues of a repo", "github.issues.issues_list_for_repo").await;
    assert_eq!(listed["approval"], "approve");
    assert_eq!(item(&view, "delete a repository", "github.repos.repos_delete").await["approval"], "block");
    assert_eq!(item(&view, "create an issue", "github.issues.issues_create").await["approval"], "run");
}
