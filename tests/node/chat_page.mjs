// toy serve's chat page in headless Chromium (Debian's, driven by playwright-core):
// type a message, see a streamed reply and the tokens/s, a second turn that keeps the
// conversation, a stopped reply, and markup in the conversation shown as text. With KEY
// (a server started with --api-key KEY): the page asks for the key, and chats once given it.
//
// Nothing here depends on how fast the machine is: every wait is for something the page
// shows, with a limit (WAIT) that only catches a hang; where a check needs a reply to come
// over time (its tokens/s, Stop clicked while it comes), the test slows the browser's
// download and makes the replies whole max_tokens long (ignore_eos), so that it does on
// any machine.
//
// usage: node chat_page.mjs PORT [CHROMIUM] [KEY]
import { chromium } from "playwright-core";
import { check, finish } from "./check.mjs";

const [port, exe = "/usr/bin/chromium", key] = process.argv.slice(2);
const WAIT = 300000; // ms: the longest any step may take (Chromium sanitized or loaded) before it is a hang

const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  timeout: WAIT,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
  page.setDefaultNavigationTimeout(WAIT);
  const requests = [];
  page.on("request", r => { if (r.url().includes("/v1/chat/completions")) requests.push(JSON.parse(r.postData())); });
  // replies of at most 48 tokens, so that four turns fit the bundled model's 512-token context
  await page.goto(`http://127.0.0.1:${port}/?max_tokens=48`);
  check((await page.title()) === "toy chat", "the page's title");

  const replies = () => page.$$eval(".msg.assistant, .msg.error", els => els.length);
  const reply = async text => {
    const before = await replies();
    await page.fill("#input", text);
    await page.press("#input", "Enter");
    // the reply is done when its bubble is there and Send is enabled again
    await page.waitForFunction(n => document.querySelectorAll(".msg.assistant, .msg.error").length > n &&
      !document.getElementById("send").disabled, before, { polling: 10 });
    check((await page.$$(".msg.error")).length === 0, "no reply ends in an error");
    const all = await page.$$eval(".msg.assistant .text", els => els.map(e => e.textContent));
    return all[all.length - 1];
  };

  if (key) {
    // the page finds out the server wants a key (its /v1/models is 401) and asks for it
    await page.waitForSelector("#keyform:not([hidden])");
    check(!(await page.textContent("#model")), "no model name before the key");
    await page.fill("#key", key);
    await page.click("#usekey");
    await page.waitForFunction(() => document.getElementById("model").textContent.length > 0);
    check(await page.isHidden("#keyform"), "the key form goes away once the key is given");
    const answer = await reply("Who made the heaven and the earth?");
    check(answer.length > 0, "a reply with the key");
    check(requests.length === 1, "one request with the key");
    await browser.close();
    finish("chat_page (API key)");
  }

  // From here every reply is max_tokens (48) long, and the browser downloads at DOWNLOAD
  // bytes/s: a reply (some 9 kB of events) reaches the page in parts over seconds, never
  // at once, which the tokens/s need (the page shows them once time has passed between
  // two tokens).
  await page.route("**/v1/chat/completions", route =>
    route.continue({ postData: JSON.stringify({ ...JSON.parse(route.request().postData()), ignore_eos: true }) }));
  const cdp = await page.context().newCDPSession(page);
  const download = bytesPerSecond => cdp.send("Network.emulateNetworkConditions",
    { offline: false, latency: 0, downloadThroughput: bytesPerSecond, uploadThroughput: -1 });
  const DOWNLOAD = 8000;
  await download(DOWNLOAD);

  const first = await reply("Who made the heaven and the earth?");
  check(first.length > 0, "a streamed reply appears");
  check(/tokens\/s/.test(await page.textContent("#speed")), `the tokens/s are shown: ${await page.textContent("#speed")}`);
  const second = await reply("And what did he say?");
  check(second.length > 0, "a second reply appears");
  const last = requests[requests.length - 1];
  check(last && last.messages.length === 3 && last.messages[1].role === "assistant" && last.messages[1].content === first,
        "the second turn sends the conversation, the first reply included");

  // markup typed into the conversation stays text
  await reply('<img src=x onerror="window.injected = 1"><b>bold</b>');
  check((await page.$$("#log img, #log b")).length === 0, "no element is made from the conversation's text");
  check(!(await page.evaluate(() => window.injected)), "no script ran from the conversation's text");

  // a reply can be stopped: Stop is clicked the moment it is enabled, while the reply still
  // comes (at 200 bytes/s it would take most of a minute), and the page is ready for the
  // next turn
  await download(200);
  await page.fill("#input", "Tell me everything.");
  await page.press("#input", "Enter");
  const clicked = await page.waitForFunction(() => {
    const b = document.getElementById("stop");
    if (b.disabled) return document.querySelectorAll(".msg.assistant, .msg.error").length === 4 && "finished";
    b.click();
    return "clicked";
  }, null, { polling: 5 });
  await page.waitForFunction(() => !document.getElementById("send").disabled && document.getElementById("stop").disabled,
                             null, { polling: 10 });
  check(await clicked.jsonValue() === "clicked", `the stop button, clicked while the reply comes: ${await clicked.jsonValue()}`);
  check((await page.$$(".msg.error")).length === 0, "a stopped reply is no error");
} finally {
  await browser.close();
}
finish("chat_page");
