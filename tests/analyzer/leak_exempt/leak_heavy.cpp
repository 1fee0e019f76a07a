// leak.exempt-gxx compiles this with g++ under tftrace: the standard
// library's heavy headers make cc1plus keep ~200 MiB of collected heap in
// ~90 blocks to its end, which tfdump --check read as a leak before
// analyzer/leak/leak_exempt.c. Never run.
#include <algorithm>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
int main() {
    std::regex re("a+b*");
    std::map<std::string, std::vector<int>> m;
    m["x"].push_back(std::regex_match("aab", re));
    std::cout << m.size() << "\n";
}
