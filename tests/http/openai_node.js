// An OpenAI-compatible server on Node's http module: answers every chat completion
// with the verdict `Match`, streamed (server-sent events, chunked) when asked. `/stats`
// reports the requests served and the connections opened (its own included).
// Usage: node openai_node.js PORT   (prints "ready" when listening)
const http = require("http");

const answer = '{"value":"Match"}';
let served = 0;
let connections = 0;

const server = http.createServer((req, res) => {
  if (req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ served, connections }));
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const request = JSON.parse(Buffer.concat(chunks).toString());
    served += 1;
    const usage = { prompt_tokens: 40, completion_tokens: 5 };
    if (!request.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({
        choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
        usage,
      }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    const event = (payload) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
    event({ choices: [{ index: 0, delta: { content: answer.slice(0, 6) }, finish_reason: null }] });
    setTimeout(() => {
      event({ choices: [{ index: 0, delta: { content: answer.slice(6) }, finish_reason: null }] });
      event({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage });
      res.write("data: [DONE]\n\n");
      res.end();
    }, 1);
  });
});
server.on("connection", () => {
  connections += 1;
});
server.listen({ port: Number(process.argv[2]), host: "127.0.0.1" }, () => console.log("ready"));
