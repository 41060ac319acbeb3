// Open an approval link in headless Chromium, click a button, save screenshots
// (`<name>-pending.png` before, `<name>.png` after) and print, as JSON, the pending page's heading and
// text and the outcome page's heading and text.
//
//   node approve.mjs <approval-url> <screenshot.png> [Approve|Decline|"Always allow …"]
//
// Uses Debian's `chromium` package (CHROMIUM overrides the path): playwright-core
// never downloads a browser. Each launch gets a fresh, empty profile.
import { chromium } from "playwright-core";

const [url, screenshot, button = "Approve"] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error("usage: node approve.mjs <approval-url> <screenshot.png> [Approve|Decline|'Always allow …']");
  process.exit(2);
}

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
try {
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } }); // a phone
  const dialogs = [];
  page.on("dialog", async (dialog) => {
    dialogs.push(dialog.message());
    await dialog.dismiss();
  });
  const response = await page.goto(url);
  if (response.status() !== 200) throw new Error(`the approval page answered ${response.status()}`);
  const before = await page.locator("h1").innerText();
  const pending = await page.locator("main").innerText();
  await page.screenshot({ path: screenshot.replace(/\.png$/, "") + "-pending.png", fullPage: true });
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: button }).click()]);
  const heading = await page.locator("h1").innerText();
  const text = await page.locator("main").innerText();
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ before, pending, heading, text, dialogs }));
} finally {
  await browser.close();
}
