// Small development deployment: Flex Consumption, the smallest Azure Managed Redis, a few thousand tokens per
// minute per tier. Secrets come from the deploying shell's environment, never from this file:
//   export KAFKA_PASSWORD=...            (required)
//   export SERVICENOW_PASSWORD=...       (optional; empty turns write-back off)
//   export SEARCH_API_KEY=...            (optional)
//   export EXISTING_REDIS_URL=...        (only with redisMode = 'existing')
using 'main.bicep'

param namePrefix = 'sgdev'
param tags = {
  environment: 'dev'
}

param hostingPlanSku = 'FC1'
param maximumInstanceCount = 40
param instanceMemoryMB = 2048
param storageSkuName = 'Standard_LRS'
param logRetentionInDays = 30
param keyVaultPurgeProtection = false
param rustLog = 'info,stormgate=debug'

// Capacity is in units of 1,000 tokens per minute: 10 = 10,000 TPM. The governor gets exactly this budget.
param premiumDeploymentName = 'premium'
param premiumModelName = 'gpt-4.1'
param premiumModelVersion = '2025-04-14'
param premiumCapacity = 10
param standardDeploymentName = 'standard'
param standardModelName = 'gpt-4.1-mini'
param standardModelVersion = '2025-04-14'
param standardCapacity = 30

param redisMode = 'managed'
param redisSkuName = 'Balanced_B0'
param redisPersistenceEnabled = false
param existingRedisUrl = readEnvironmentVariable('EXISTING_REDIS_URL', '')

param kafkaBrokers = 'kafka-dev.example.net:9093'
param kafkaTopic = 'servicenow.incident.events'
param kafkaConsumerGroup = 'stormgate-dev'
param kafkaUsername = 'stormgate-dev'
param kafkaPassword = readEnvironmentVariable('KAFKA_PASSWORD')
param kafkaNotificationsTopic = 'stormgate.notifications'

param serviceNowInstanceUrl = ''
param serviceNowUsername = ''
param serviceNowPassword = readEnvironmentVariable('SERVICENOW_PASSWORD', '')

param searchEndpoint = ''
param searchIndex = ''
param searchApiKey = readEnvironmentVariable('SEARCH_API_KEY', '')
