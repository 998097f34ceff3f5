// Published test vectors: HMAC-SHA1 (RFC 2202), HMAC-SHA-256/384/512 (RFC 4231), SHA (FIPS 180-4
// examples) and base64 (RFC 4648). Keys and data are hex; `truncate` is the number of hex digits the
// RFC gives (test case 5 of RFC 4231 only publishes the first 128 bits).
export interface HmacVector {
  name: string;
  key: string;
  data: string;
  hash: "sha1" | "sha256" | "sha384" | "sha512";
  digest: string;
}

const hex = (s: string) => Buffer.from(s, "latin1").toString("hex");
const rep = (byte: string, n: number) => byte.repeat(n);

const rfc2202: [string, string, string][] = [
  [rep("0b", 20), hex("Hi There"), "b617318655057264e28bc0b6fb378c8ef146be00"],
  [hex("Jefe"), hex("what do ya want for nothing?"), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"],
  [rep("aa", 20), rep("dd", 50), "125d7342b9ac11cd91a39af48aa17b4f63f175d3"],
  ["0102030405060708090a0b0c0d0e0f10111213141516171819", rep("cd", 50), "4c9007f4026250c6bc8414f9bf50c86c2d7235da"],
  [rep("0c", 20), hex("Test With Truncation"), "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"],
  [rep("aa", 80), hex("Test Using Larger Than Block-Size Key - Hash Key First"), "aa4ae5e15272d00e95705637ce8a3b55ed402112"],
  [rep("aa", 80), hex("Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data"), "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"],
];

const rfc4231Inputs: [string, string][] = [
  [rep("0b", 20), hex("Hi There")],
  [hex("Jefe"), hex("what do ya want for nothing?")],
  [rep("aa", 20), rep("dd", 50)],
  ["0102030405060708090a0b0c0d0e0f10111213141516171819", rep("cd", 50)],
  [rep("0c", 20), hex("Test With Truncation")],
  [rep("aa", 131), hex("Test Using Larger Than Block-Size Key - Hash Key First")],
  [rep("aa", 131), hex("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.")],
];

const rfc4231: Record<"sha256" | "sha384" | "sha512", string[]> = {
  sha256: [
    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
    "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
    "a3b6167473100ee06e0c796c2955552b",
    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
  ],
  sha384: [
    "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6",
    "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649",
    "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b2a5ab39dc13814b94e3ab6e101a34f27",
    "3e8a69b7783c25851933ab6290af6ca77a9981480850009cc5577c6e1f573b4e6801dd23c4a7d679ccf8a386c674cffb",
    "3abf34c3503b2a23a46efc619baef897",
    "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952",
    "6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5a678cc31e799176d3860e6110c46523e",
  ],
  sha512: [
    "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
    "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
    "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb",
    "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3dba91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd",
    "415fad6271580a531d4179bc891d87a6",
    "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
    "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58",
  ],
};

export const hmacVectors: HmacVector[] = [
  ...rfc2202.map(([key, data, digest], i) => ({ name: `RFC 2202 HMAC-SHA1 test case ${i + 1}`, key, data, hash: "sha1" as const, digest })),
  ...(["sha256", "sha384", "sha512"] as const).flatMap((hash) =>
    rfc4231Inputs.map(([key, data], i) => ({ name: `RFC 4231 HMAC-${hash.toUpperCase()} test case ${i + 1}`, key, data, hash, digest: rfc4231[hash][i]! })),
  ),
];

/** FIPS 180-4 example digests of "abc" and of the empty string. */
export const shaVectors: { data: string; hash: string; digest: string }[] = [
  { data: "abc", hash: "sha1", digest: "a9993e364706816aba3e25717850c26c9cd0d89d" },
  { data: "abc", hash: "sha256", digest: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
  { data: "abc", hash: "sha384", digest: "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7" },
  { data: "abc", hash: "sha512", digest: "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f" },
  { data: "", hash: "sha256", digest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
];

/** RFC 4648 section 10. */
export const base64Vectors: [string, string][] = [
  ["", ""],
  ["f", "Zg=="],
  ["fo", "Zm8="],
  ["foo", "Zm9v"],
  ["foob", "Zm9vYg=="],
  ["fooba", "Zm9vYmE="],
  ["foobar", "Zm9vYmFy"],
];
