// A fixed-latency OpenAI-compatible server on Node's event loop: every
// POST /v1/chat/completions is answered after LATENCY_MS with a verdict, and
// `/stats` reports how many requests were served and the most at once.
// Usage: node server.js PORT LATENCY_MS   (prints "ready" when listening)
const http = require("http");

const port = Number(process.argv[2] || 8787);
const latency = Number(process.argv[3] || 100);
let served = 0;
let inFlight = 0;
let peak = 0;
// Answer 429 to the first N requests (the adaptive-concurrency test), then serve.
let reject = Number(process.env.REJECT_FIRST || 0);

const body = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  model: "bench",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: '{"value":"Match"}' },
      finish_reason: "stop",
    },
  ],
  usage: { prompt_tokens: 40, completion_tokens: 5, total_tokens: 45 },
});

const server = http.createServer((req, res) => {
  if (req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ served, peak }));
    served = 0;
    peak = 0;
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (reject > 0) {
      reject -= 1;
      res.writeHead(429, { "content-type": "application/json", "retry-after": "0" });
      res.end('{"error":{"message":"rate limited"}}');
      return;
    }
    inFlight += 1;
    peak = Math.max(peak, inFlight);
    setTimeout(() => {
      inFlight -= 1;
      served += 1;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
    }, latency);
  });
});
server.keepAliveTimeout = 60000;
server.maxRequestsPerSocket = 0;
// A deep accept queue: ten thousand clients connect at once (the kernel caps it at
// net.core.somaxconn).
server.listen({ port, host: "127.0.0.1", backlog: 65535 }, () => console.log("ready"));
