// Drive the approver's console in headless Chromium, save screenshots at a
// desktop and a phone width, and print what the pages said, as JSON.
//
//   node console.mjs link <console-link> <screenshot-dir>
//     Sign in with a one-time console link, screenshot the console, press
//     "Always allow" on the pending approval, then "Revoke" on the grant it made.
//   node console.mjs oidc <console-url> <screenshot-dir> <login>
//     Sign in with the OIDC issuer (the test's own OpenID provider): its
//     login form takes <login>, then its consent page is confirmed.
//
// Uses Debian's `chromium` package (CHROMIUM overrides the path): playwright-core
// never downloads a browser. Each launch gets a fresh, empty profile.
import { chromium } from "playwright-core";

const [mode, url, dir, login] = process.argv.slice(2);
if (!["link", "oidc"].includes(mode) || !url || !dir || (mode === "oidc" && !login)) {
  console.error("usage: node console.mjs link <console-link> <dir> | oidc <console-url> <dir> <login>");
  process.exit(2);
}

const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  // This machine's network is closed: background connections only add noise.
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

/// Screenshots of the page as it is, at both widths: their paths.
async function shoot(page, name) {
  const shots = [];
  for (const [width, viewport] of [["desktop", DESKTOP], ["phone", PHONE]]) {
    await page.setViewportSize(viewport);
    const path = `${dir}/${name}-${width}.png`;
    await page.screenshot({ path, fullPage: true });
    shots.push(path);
  }
  await page.setViewportSize(DESKTOP);
  return shots;
}

/// Click the button named `name` and wait for the page it leads to.
async function press(page, name) {
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name }).first().click()]);
  return page.locator("main").innerText();
}

async function withLink(page) {
  const response = await page.goto(url);
  if (response.status() !== 200) throw new Error(`the console link answered ${response.status()}`);
  const confirm = await page.locator("main").innerText();
  const console_ = await press(page, "Sign in");
  const screenshots = await shoot(page, "console-pending");
  const afterApproval = await press(page, /^Always allow/);
  screenshots.push(...(await shoot(page, "console-granted")));
  const afterRevoke = await press(page, "Revoke");
  screenshots.push(...(await shoot(page, "console-revoked")));
  return { confirm, console: console_, afterApproval, afterRevoke, screenshots };
}

async function withOidc(page) {
  await page.goto(url);
  const signIn = await page.locator("main").innerText();
  await Promise.all([page.waitForNavigation(), page.getByRole("link", { name: /^Sign in with/ }).click()]);
  // The provider's login form, then its consent page (when it asks).
  await page.locator('input[name="login"]').fill(login);
  const password = page.locator('input[name="password"]');
  if (await password.count()) await password.fill("any password");
  await Promise.all([page.waitForNavigation(), page.locator('button[type="submit"]').first().click()]);
  if (!page.url().startsWith(new URL(url).origin)) {
    await Promise.all([page.waitForNavigation(), page.locator('button[type="submit"]').first().click()]);
  }
  // The callback's page moves on to the console by itself.
  await page.waitForURL(/\/console\?notice=signed-in$/);
  const console_ = await page.locator("main").innerText();
  const screenshots = await shoot(page, "console-oidc");
  return { signIn, console: console_, screenshots };
}

try {
  const page = await browser.newPage({ viewport: DESKTOP });
  const dialogs = [];
  page.on("dialog", async (dialog) => {
    dialogs.push(dialog.message());
    await dialog.dismiss();
  });
  const seen = mode === "link" ? await withLink(page) : await withOidc(page);
  console.log(JSON.stringify({ ...seen, dialogs }));
} finally {
  await browser.close();
}
