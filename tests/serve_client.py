"""A toy serve process for the Python serve tests: started on a free port, requests
whole or streamed, stopped with SIGTERM."""
import http.client
import json
import re
import signal
import subprocess
import threading


class Server:
    def __init__(self, toy, model, *args):
        self.proc = subprocess.Popen([toy, "serve", "-m", model, "--port", "0", "-t", "2", *args],
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            raise SystemExit(f"toy serve did not start: {line}{self.proc.stderr.read()}")
        self.port = int(m.group(1))
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def post(self, body, path="/v1/chat/completions"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, json.loads(text)

    def stream(self, body, path="/v1/chat/completions"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        events = [json.loads(e[6:]) for e in data.split("\n\n") if e.startswith("data: {")]
        return r.status, events

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)
