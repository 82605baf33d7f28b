// The floor: N raw concurrent chat requests from a Node client (keep-alive, no socket
// limit), the same body sap sends for one judge call. Prints the wall time in ms.
// Usage: node floor.js PORT N
const http = require("http");

const port = Number(process.argv[2] || 8787);
const n = Number(process.argv[3] || 200);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const payload = JSON.stringify({
  model: "bench",
  messages: [
    { role: "system", content: "Answer with JSON that fits the schema." },
    { role: "user", content: "Judge whether this item fits.\n\nitem 17" },
  ],
  response_format: { type: "json_object" },
});

function one() {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: "/v1/chat/completions",
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          JSON.parse(Buffer.concat(chunks).toString());
          resolve();
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

const start = process.hrtime.bigint();
Promise.all(Array.from({ length: n }, one)).then(() => {
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(ms.toFixed(1));
  agent.destroy();
});
