# jwt_token.sh: the JWT scenarios' key set and token (sourced, not run), shared by
# proxy_vs_nginx.sh and callgrind.sh. `make_jwt DIR` writes DIR/jwks.json (one P-256 key by
# openssl, kid "bench") and DIR/token (an ES256 token by that key: iss https://id.bench, aud api,
# scope api:read, valid for a day); python3 turns openssl's DER signature into JWS's r||s.
# shellcheck shell=bash

make_jwt() { # make_jwt DIR
    local dir="$1"
    mkdir -p "$dir"
    openssl ecparam -name prime256v1 -genkey -noout -out "$dir/key.pem" 2>/dev/null || { echo "make_jwt: openssl ecparam failed" >&2; return 1; }
    openssl ec -in "$dir/key.pem" -pubout -outform DER -out "$dir/pub.der" 2>/dev/null || { echo "make_jwt: openssl ec failed" >&2; return 1; }
    python3 - "$dir" <<'PY' || { echo "make_jwt: making the token failed" >&2; return 1; }
import base64, json, subprocess, sys, time
d = sys.argv[1]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
point = open(f"{d}/pub.der", "rb").read()[-65:]
jwk = {"kty": "EC", "crv": "P-256", "kid": "bench", "x": b64(point[1:33]), "y": b64(point[33:])}
open(f"{d}/jwks.json", "w").write(json.dumps({"keys": [jwk]}))
header = b64(json.dumps({"alg": "ES256", "typ": "JWT", "kid": "bench"}).encode())
claims = {"sub": "bench", "iss": "https://id.bench", "aud": "api", "exp": int(time.time()) + 86400, "scope": "api:read"}
message = f"{header}.{b64(json.dumps(claims).encode())}"
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f"{d}/key.pem"], input=message.encode(), capture_output=True, check=True).stdout
r_len = der[3]; r = der[4:4 + r_len]; s = der[6 + r_len:]
raw = r[-32:].rjust(32, b"\0") + s[-32:].rjust(32, b"\0")
open(f"{d}/token", "w").write(f"{message}.{b64(raw)}")
PY
    chmod 755 "$dir"
    chmod 644 "$dir"/jwks.json
}

